/**
 * Adaptive threads: node-llama-cpp sets the context's thread count before every batch it
 * decodes; this hook picks that count from the work of the batch. A step of a small model is too
 * little work to divide (measured on a 2-CPU host: 2 threads 1.7x slower than 1 for one
 * completion of a 100 M model, 25x for the tiny one), while a batch of many tokens (a prompt, or
 * several completions' steps) divides well, as llama-server's `-tb` (threads for batches) does.
 * Uses internals of node-llama-cpp 3.22 (the addon context's `initBatch`, `addToBatch`,
 * `setThreads`), checked before use.
 */
import type { LlamaContext } from 'node-llama-cpp';

interface NativeContext {
  initBatch?: (...args: unknown[]) => unknown;
  addToBatch?: (sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, ...rest: unknown[]) => unknown;
  setThreads?: (threads: number) => unknown;
}

/**
 * Makes `context` decode each batch with `pick(tokens)` threads, `tokens` being the batch's
 * token count. Returns false (and changes nothing) when this node-llama-cpp lacks the internals.
 */
export function installAdaptiveThreads(context: LlamaContext, pick: (batchTokens: number) => number): boolean {
  const native = (context as unknown as { _ctx?: NativeContext })._ctx;
  const { initBatch, addToBatch, setThreads } = native ?? {};
  if (!native || typeof initBatch !== 'function' || typeof addToBatch !== 'function') return false;
  if (typeof setThreads !== 'function') return false;
  let tokens = 0;
  // The addon's methods are read-only on its prototype: define them on the instance.
  const define = (name: keyof NativeContext, value: (...args: never[]) => unknown) =>
    Object.defineProperty(native, name, { configurable: true, writable: true, value });
  define('initBatch', (...args: unknown[]) => {
    tokens = 0;
    return initBatch.apply(native, args);
  });
  define('addToBatch', (sequenceId: number, first: number, batch: Uint32Array, ...rest: unknown[]) => {
    tokens += batch.length;
    return addToBatch.call(native, sequenceId, first, batch, ...rest);
  });
  define('setThreads', (_n: number) => setThreads.call(native, pick(tokens)));
  return true;
}

/**
 * Adaptive threads: node-llama-cpp sets the context's thread count before every batch it
 * decodes; this hook picks that count from the work of the batch. A step of a small model is too
 * little work to divide (measured on a 2-CPU host: 2 threads 1.7x slower than 1 for one
 * completion of a 100 M model, 25x for the tiny one), while a batch of many tokens (a prompt, or
 * several completions' steps) divides well, as llama-server's `-tb` (threads for batches) does.
 * Uses internals of node-llama-cpp 3.22 (the addon context's `initBatch`, `addToBatch`,
 * `setThreads`), checked before use.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
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

/** A thread of a process (Linux /proc/PID/task): its id, name, nice value and CPU time. */
export interface ThreadInfo {
  readonly tid: number;
  readonly name: string;
  readonly nice: number;
  /** User + system CPU time so far, in clock ticks. */
  readonly cpuTicks: number;
}

/** The threads of process `pid` (default: this one); [] where /proc is not there. */
export function listThreads(pid: number | 'self' = 'self'): ThreadInfo[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // not Linux
  }
  const threads: ThreadInfo[] = [];
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // "tid (name) state ppid …": the name may hold spaces and parentheses; utime, stime
      // and nice (fields 14, 15, 19) are 11, 12 and 16 places after the state (field 3).
      const close = stat.lastIndexOf(')');
      const f = stat.slice(close + 2).split(' ');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      threads.push({ tid: Number(tid), name, nice: Number(f[16]), cpuTicks: Number(f[11]) + Number(f[12]) });
    } catch {
      // a thread that ended meanwhile
    }
  }
  return threads;
}

/** libuv's name for its thread-pool threads (Node 22 and later; Node 20 names no thread). */
const POOL_THREAD = 'libuv-worker';

/**
 * Linux: lowers the scheduling priority (nice) of the threads that run the model, so that on a
 * host with few cores the event loop (HTTP, /v1/models, the watchdog) gets a core at once when it
 * has work, and generation takes the rest. node-llama-cpp decodes on libuv's thread pool, and
 * llama.cpp's compute threads are created by the pool thread that runs a decode and inherit its
 * priority. Where Node names its threads (22 and later), only the pool's are lowered (V8's
 * helpers stay as they are); on Node 20, which names none, every thread but the main one. Call
 * it once the model is loaded (the pool exists then). Returns how many threads were lowered;
 * elsewhere nothing is done.
 */
export function lowerWorkerThreadPriority(nice = 10): number {
  const threads = listThreads();
  const named = threads.some((t) => t.name === POOL_THREAD);
  let n = 0;
  for (const t of threads) {
    if (t.tid === process.pid || (named && t.name !== POOL_THREAD)) continue;
    try {
      setPriority(t.tid, nice);
      n++;
    } catch {
      // a thread that ended meanwhile, or not permitted
    }
  }
  return n;
}

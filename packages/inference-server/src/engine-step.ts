/**
 * The token loop of a plain answer. node-llama-cpp's `sequence.evaluate` spends about 0.25 ms of
 * the event loop on each step (its batch queue and dispatch, the sampler's configuration, locks,
 * a new array of the sequence's tokens), during which the model waits: on a small model, 5% of a
 * step. While a completion is the only one on the context, its steps here go straight to the
 * addon context (a one-token batch, the decode, the sample), under the context's own lock, and
 * the sequence's record of its tokens is kept as node-llama-cpp keeps it, so that prefix reuse,
 * state saving and the next `evaluate` see the same sequence. The prompt, every step while other
 * completions run (whose steps node-llama-cpp batches with this one's), a seeded sampler (whose
 * random state must run unbroken) and a context about to be shifted go through `evaluate`. A
 * direct step decodes the token it sampled while the caller works on it.
 *
 * Uses internals of node-llama-cpp 3.22 (the addon context and sampler, the sequence's token
 * record, the context's lock in node-llama-cpp's own lifecycle-utils), each checked before use:
 * without one of them, every step goes through `evaluate`.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';

/** The sampler settings `evaluate` takes (temperature, topP, topK, seed, repeatPenalty). */
export type StepSampling = NonNullable<Parameters<LlamaContextSequence['evaluate']>[1]>;

/** When a step may go straight to the addon, and with how many threads. */
export interface Stepping {
  /** Whether this completion is the only one on the context now. */
  readonly alone: () => boolean;
  /** Threads of a one-token step (the server's --threads). */
  readonly threads: number;
}

interface AddonSampler {
  applyConfig(config: object): void;
  dispose(): void;
}
interface AddonContext {
  initBatch(size: number): void;
  addToBatch(sequenceId: number, firstTokenIndex: number, tokens: Uint32Array, logits: Uint32Array): ArrayLike<number>;
  decodeBatch(): Promise<void>;
  sampleToken(batchLogitIndex: number, sampler: AddonSampler): Promise<number>;
  setThreads(threads: number): void;
}
interface Internals {
  readonly _sequenceId: number;
  _contextTokens: Token[];
  _nextTokenIndex: number;
  readonly _loadedTokenPredictions: readonly unknown[];
  readonly needsCheckpoints: boolean;
  readonly disposed: boolean;
  _resolveSamplerConfig(options: object): object;
  readonly model: { readonly _model: unknown };
  readonly _context: {
    readonly _ctx: AddonContext;
    readonly contextSize: number;
    readonly _backendContextDisposeGuard: { createPreventDisposalHandle(): { dispose(): void } };
    readonly _llama: {
      readonly gpu: string | false;
      readonly _bindings: { AddonSampler: new (model: unknown) => AddonSampler };
    };
  };
}
type Lock = { dispose(): void };
type AcquireLock = (scope: [object, string]) => Promise<Lock>;

let lockModule: Promise<AcquireLock | null> | null = null;
/**
 * node-llama-cpp's `acquireLock`: its lifecycle-utils as node-llama-cpp itself resolves it, the
 * same module instance, so that a lock on `[context, 'context']` excludes its batch dispatch.
 */
export function contextLock(): Promise<AcquireLock | null> {
  lockModule ??= (async () => {
    try {
      const fromLlama = createRequire(createRequire(import.meta.url).resolve('node-llama-cpp'));
      const mod = (await import(pathToFileURL(fromLlama.resolve('lifecycle-utils')).href)) as {
        acquireLock?: AcquireLock;
      };
      return typeof mod.acquireLock === 'function' ? mod.acquireLock : null;
    } catch {
      return null;
    }
  })();
  return lockModule;
}

/** The sequence's internals when every one a direct step needs is there; null otherwise. */
function internalsOf(sequence: LlamaContextSequence): Internals | null {
  const s = sequence as unknown as Partial<Internals>;
  const c = s._context;
  const ctx = c?._ctx;
  const ok =
    typeof s._sequenceId === 'number' &&
    Array.isArray(s._contextTokens) &&
    typeof s._nextTokenIndex === 'number' &&
    Array.isArray(s._loadedTokenPredictions) &&
    s.needsCheckpoints === false &&
    typeof s._resolveSamplerConfig === 'function' &&
    s.model?._model != null &&
    c != null &&
    ctx != null &&
    ['initBatch', 'addToBatch', 'decodeBatch', 'sampleToken', 'setThreads'].every(
      (m) => typeof (ctx as unknown as Record<string, unknown>)[m] === 'function',
    ) &&
    typeof c._backendContextDisposeGuard?.createPreventDisposalHandle === 'function' &&
    typeof c._llama?._bindings?.AddonSampler === 'function' &&
    // node-llama-cpp serialises Vulkan decodes across contexts with a lock of its own.
    c._llama.gpu !== 'vulkan';
  return ok ? (s as Internals) : null;
}

const NO_LOGITS_BUT_THE_LAST = Uint32Array.of(0);
let stepsTaken = 0;
/** Steps taken directly in this process so far. */
export const directSteps = (): number => stepsTaken;

/**
 * Runs `work` on the addon context of a sequence that is not disposed, keeping the context from
 * disposal until it ends (the context's lock is the caller's).
 */
async function onContext<T>(s: Internals, work: (ctx: AddonContext) => Promise<T>): Promise<T> {
  if (s.disposed) throw new Error('the sequence is disposed');
  const guard = s._context._backendContextDisposeGuard.createPreventDisposalHandle();
  try {
    return await work(s._context._ctx);
  } finally {
    guard.dispose();
  }
}

/**
 * Decodes `token` at the sequence's next position on the addon, the context's lock held by the
 * caller, and records it as the sequence's (as node-llama-cpp's own decode does); resolves to the
 * batch index of its logits.
 */
function decodeOne(s: Internals, token: Token, threads: number): Promise<number> {
  return onContext(s, async (ctx) => {
    const at = s._nextTokenIndex;
    ctx.initBatch(1);
    const logitIndex = ctx.addToBatch(s._sequenceId, at, Uint32Array.of(token), NO_LOGITS_BUT_THE_LAST)[0] as number;
    ctx.setThreads(threads);
    await ctx.decodeBatch();
    s._nextTokenIndex = at + 1;
    s._contextTokens.push(token);
    return logitIndex;
  });
}

/**
 * Samples the token that follows the decoded batch's logits at `logitIndex`, the lock held by the
 * caller. `sampling` is given to the sampler first when it changes from step to step (the tokens a
 * penalty punishes); null: the sampler keeps the settings it was given.
 */
function sampleNext(
  s: Internals,
  logitIndex: number,
  sampler: AddonSampler,
  sampling: StepSampling | null,
): Promise<Token> {
  return onContext(s, async (ctx) => {
    if (sampling) sampler.applyConfig(s._resolveSamplerConfig(sampling));
    const next = await ctx.sampleToken(logitIndex, sampler);
    if (next === -1) throw new Error('Failed to sample next token');
    stepsTaken++;
    return next as Token;
  });
}

/**
 * The tokens sampled after `tokens` on `sequence` (held exclusively by the caller), end-of-
 * generation tokens included, until the caller stops asking: what `sequence.evaluate(tokens,
 * {...sampling, yieldEogToken: true})` yields, with the steps taken directly where `stepping`
 * allows (see above). Without `stepping`, exactly that `evaluate`.
 *
 * A token sampled directly is decoded while the caller works on it (its text, the stream's
 * write), so that the model does not wait for the caller: every token but the last the caller
 * takes, `limit` tokens or an end-of-generation token. A caller that stops early (a stop string)
 * waits for that decode to end, and the sequence holds the token.
 */
export async function* sampledTokens(
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  sampling: StepSampling,
  stepping: Stepping | null,
  limit = Number.POSITIVE_INFINITY,
): AsyncGenerator<Token, void, undefined> {
  const s = stepping ? internalsOf(sequence) : null;
  const acquire = s ? await contextLock() : null;
  // A seeded random sampler is one random sequence: it is never handed from one sampler to another.
  const seeded = sampling.seed != null && (sampling.temperature ?? 0) > 0;
  const direct = () =>
    s !== null &&
    acquire !== null &&
    !seeded &&
    stepping!.alone() &&
    s._loadedTokenPredictions.length === 0 &&
    s._context.contextSize - 1 - s._nextTokenIndex > 0;
  // Without a penalty (whose punished tokens change every step) the settings are given once.
  const perStep = sampling.repeatPenalty ? sampling : null;
  let pending: readonly Token[] = tokens;
  let taken = 0;
  let sampler: AddonSampler | null = null;
  // The decode of `pending` under way (its logits' batch index), started before it was yielded.
  let ahead: Promise<number> | null = null;
  // The context's lock, held from one direct step to the next while the completion stays alone
  // (anything else that needs the context counts itself in `alone` before it waits for the lock).
  let lock: Lock | null = null;
  const release = () => {
    lock?.dispose();
    lock = null;
  };
  const decodeAhead = (token: Token) => {
    ahead = decodeOne(s!, token, stepping!.threads);
    // Its failure is the next step's (or ignored when the caller has stopped), never unhandled.
    ahead.catch(() => {});
  };
  try {
    for (;;) {
      if (pending.length === 1 && (ahead !== null || direct())) {
        if (ahead === null) {
          lock ??= await acquire!([s!._context, 'context']);
          if (!direct()) {
            release();
            continue;
          }
          decodeAhead(pending[0]!);
        }
        if (!sampler) {
          sampler = new s!._context._llama._bindings.AddonSampler(s!.model._model);
          sampler.applyConfig(s!._resolveSamplerConfig(sampling));
        }
        const decoding: Promise<number> = ahead!;
        ahead = null;
        const next = await sampleNext(s!, await decoding, sampler, perStep);
        pending = [next];
        taken++;
        if (taken < limit && !sequence.model.isEogToken(next) && direct()) decodeAhead(next);
        yield next;
        continue;
      }
      release();
      let handOver = false;
      for await (const next of sequence.evaluate(pending as Token[], { ...sampling, yieldEogToken: true })) {
        pending = [next];
        taken++;
        yield next;
        if (direct()) {
          handOver = true;
          break;
        }
      }
      if (!handOver) return;
    }
  } finally {
    // A decode started ahead ends under the lock before anything else may use the context.
    if (ahead !== null) await (ahead as Promise<number>).catch(() => {});
    release();
    sampler?.dispose();
  }
}

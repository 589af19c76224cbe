/**
 * Hands out the model's context sequences ("slots"): one per running completion, a bounded queue
 * of waiters in arrival order, and an immediate refusal when that queue is full. A free slot is
 * chosen by the prefix its sequence shares with the prompt (slots.ts); a slot given back goes to
 * the waiter whose prompt shares the longest prefix with it, else the first (slots.ts,
 * chooseWaiter: a waiter is passed over a bounded number of times). A slot whose
 * completion was aborted but whose generation has not let go of it after `stuckAfterMs` counts
 * as stuck: when every slot is stuck no completion can be served, and /health says so.
 */
import { QueueFullError } from './errors.js';
import { chooseSlot, chooseWaiter, type SlotView } from './slots.js';

/** Tokens of `slot`'s sequence that the prompt starts with. */
export type PrefixOf = (slot: number) => number;

interface Waiter {
  resolve(slot: number): void;
  reject(err: unknown): void;
  signal: AbortSignal;
  onAbort: () => void;
  prefixOf: PrefixOf | undefined;
  promptLength: number;
  /** Later waiters that got a slot before this one. */
  passedOver: number;
}

export class Scheduler {
  private readonly free: number[] = [];
  /** Per slot, when it was last handed out (0: never). */
  private readonly lastUsed: number[];
  private handedOut = 0;
  private readonly queue: Waiter[] = [];
  private readonly abortedAt = new Map<number, number>();
  /** Running (exponentially weighted) mean of completion durations, ms; null before the first. */
  private meanMs: number | null = null;

  constructor(
    readonly slots: number,
    readonly maxQueue: number,
    private readonly stuckAfterMs = 10_000,
  ) {
    for (let i = 0; i < slots; i++) this.free.push(i);
    this.lastUsed = new Array<number>(slots).fill(0);
  }

  get active(): number {
    return this.slots - this.free.length;
  }

  get waiting(): number {
    return this.queue.length;
  }

  /** Slots aborted more than `stuckAfterMs` ago and still not released. */
  stuck(now = Date.now()): number {
    let n = 0;
    for (const t of this.abortedAt.values()) if (now - t >= this.stuckAfterMs) n++;
    return n;
  }

  /**
   * A free slot now (the one whose sequence shares the longest prefix with a `promptLength`-token
   * prompt, by `prefixOf`; else the least recently used), or a place in the queue; QueueFullError
   * at once when the queue is full.
   */
  acquire(signal: AbortSignal, prefixOf?: PrefixOf, promptLength = 0): Promise<number> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.free.length > 0) {
      const views: SlotView[] = this.free.map((slot) => ({
        slot,
        matched: prefixOf ? prefixOf(slot) : 0,
        lastUsed: this.lastUsed[slot]!,
      }));
      const slot = chooseSlot(views, promptLength)!.slot;
      this.free.splice(this.free.indexOf(slot), 1);
      return Promise.resolve(this.handOut(slot));
    }
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(new QueueFullError(this.queue.length, this.retryAfterS()));
    }
    return new Promise<number>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (slot) => resolve(this.handOut(slot)),
        reject,
        signal,
        prefixOf,
        promptLength,
        passedOver: 0,
        onAbort: () => {
          const i = this.queue.indexOf(waiter);
          if (i >= 0) this.queue.splice(i, 1);
          reject(signal.reason);
        },
      };
      signal.addEventListener('abort', waiter.onAbort, { once: true });
      this.queue.push(waiter);
    });
  }

  private handOut(slot: number): number {
    this.lastUsed[slot] = ++this.handedOut;
    return slot;
  }

  /** The holder of `slot` was aborted; it still holds the slot until its generation ends. */
  noteAborted(slot: number): void {
    if (!this.abortedAt.has(slot)) this.abortedAt.set(slot, Date.now());
  }

  /**
   * Gives `slot` back: to the waiter whose prompt shares the longest prefix with its sequence
   * (chooseWaiter; those before it are passed over once more), or to the free list.
   */
  release(slot: number, durationMs?: number): void {
    this.abortedAt.delete(slot);
    if (durationMs !== undefined) {
      this.meanMs = this.meanMs === null ? durationMs : this.meanMs + EWMA_WEIGHT * (durationMs - this.meanMs);
    }
    const i = chooseWaiter(
      this.queue.map((w) => ({
        matched: matchedOn(w.prefixOf, slot),
        promptLength: w.promptLength,
        passedOver: w.passedOver,
      })),
    );
    const next = i >= 0 ? this.queue.splice(i, 1)[0] : undefined;
    for (let k = 0; k < i; k++) this.queue[k]!.passedOver++;
    if (next) {
      next.signal.removeEventListener('abort', next.onAbort);
      next.resolve(slot);
    } else {
      this.free.push(slot);
    }
  }

  /** Rejects every waiter (shutdown). */
  rejectAll(reason: unknown): void {
    for (const w of this.queue.splice(0)) {
      w.signal.removeEventListener('abort', w.onAbort);
      w.reject(reason);
    }
  }

  /** Seconds a refused client should wait: see `retryAfterEstimate`. */
  retryAfterS(): number {
    return retryAfterEstimate(this.meanMs, this.queue.length, this.slots);
  }
}

/**
 * What `prefixOf` says of `slot`; 0 when there is none or it fails (a sequence disposed at
 * shutdown): a slot is given back from a generation's end, where a throw would be unhandled.
 */
function matchedOn(prefixOf: PrefixOf | undefined, slot: number): number {
  try {
    return prefixOf ? prefixOf(slot) : 0;
  } catch {
    return 0;
  }
}

/** Weight of the newest completion in the running mean (about the last five count). */
export const EWMA_WEIGHT = 0.3;

/**
 * Seconds until a request refused now would get a sequence: the completions ahead of it (the
 * `waiting` ones and itself) finish `slots` at a time, each taking about `meanMs`. Whole
 * seconds, 1 to 60; 1 before any completion has finished.
 */
export function retryAfterEstimate(meanMs: number | null, waiting: number, slots: number): number {
  if (meanMs === null) return 1;
  const s = (meanMs * (waiting + 1)) / Math.max(1, slots) / 1000;
  return Math.min(60, Math.max(1, Math.ceil(s)));
}

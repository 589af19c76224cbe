/**
 * Progress per slot: when each running completion last moved (its prompt handed to the model, a
 * token produced). A slot with work and no progress for longer than its bound is **stalled**:
 * the model is not working although it has work (spec 3.4: the listener answers, nothing comes
 * out). While a slot's prompt is evaluated (no token yet) the bound is larger, in proportion to
 * the prompt: `stallAfterMs + promptTokens / minPromptRate`. The slots share the model's batches,
 * so a slot also waits while another evaluates its prompt (a batch of a long prompt can take
 * longer than `stallAfterMs` on a slow host): a slot past its bound is not stalled while another
 * slot's prompt evaluation is within its own bound.
 *
 * Time the model's threads spent waiting for a CPU that the host's other work held (they run at
 * SCHED_IDLE: worker-priority.ts) is not a stall: `cpuWait` starts each slot's bound again from
 * then, while `since_progress_s` still tells when a slot last moved.
 *
 * Fed by the engine (begin, token, end); read by /health, /metrics and the watchdog. Pure
 * bookkeeping: no timers; the clock is passed in.
 */

export interface ProgressOptions {
  /** No progress this long on a slot that generates: stalled (--stall-after). */
  readonly stallAfterMs: number;
  /** Prompt tokens per second the slowest healthy prompt evaluation still reaches (--min-prompt-rate). */
  readonly minPromptRate: number;
}

interface SlotWork {
  readonly startedAt: number;
  readonly promptTokens: number;
  lastAt: number;
  /** The last time the host, not the model, was the reason for no progress (cpuWait). */
  excusedAt: number;
  tokens: number;
}

export interface ProgressReport {
  /** Slots with a completion under way. */
  readonly in_flight: number;
  /** Seconds since the oldest of them began; 0 when none. */
  readonly oldest_age_s: number;
  /** Seconds since any slot last made progress; null when none has work. */
  readonly since_progress_s: number | null;
  /** Slots past their bound. */
  readonly stalled: number;
  /** Why the server is stalled, or null. */
  readonly reason: string | null;
  /** The model's threads wait for a CPU that other processes hold (SCHED_IDLE; see cpuWait). */
  readonly waiting_for_cpu: boolean;
}

const round1 = (s: number): number => Math.round(s * 10) / 10;

export class ProgressTracker {
  private readonly slots = new Map<number, SlotWork>();
  /** Whether an episode of waiting for the CPU lasts (the server's CpuWaitWatch; see cpuWait). */
  private waitingForCpu = false;

  constructor(readonly options: ProgressOptions) {}

  /** A completion starts on `slot` with a prompt of `promptTokens` (its evaluation begins). */
  begin(slot: number, promptTokens: number, now = Date.now()): void {
    this.slots.set(slot, { startedAt: now, promptTokens, lastAt: now, excusedAt: now, tokens: 0 });
  }

  /** `slot` produced tokens (or evaluated a batch). */
  progress(slot: number, now = Date.now()): void {
    const w = this.slots.get(slot);
    if (!w) return;
    w.lastAt = now;
    w.tokens += 1;
  }

  /**
   * A sample of the model's threads' wait for the CPU (the server's CpuWaitWatch, every second):
   * `waited`, they waited for a CPU until `now`, so no slot's bound counts the time before;
   * `episode`, an episode of waiting lasts (what the report says).
   */
  cpuWait(sample: { waited: boolean; episode: boolean }, now = Date.now()): void {
    if (sample.waited) for (const w of this.slots.values()) w.excusedAt = Math.max(w.excusedAt, now);
    this.waitingForCpu = sample.episode;
  }

  /** The completion on `slot` ended (whatever the outcome). */
  end(slot: number): void {
    this.slots.delete(slot);
  }

  /** The bound of one slot, ms: larger while its prompt is evaluated (no token yet). */
  boundMs(w: { tokens: number; promptTokens: number }): number {
    const { stallAfterMs, minPromptRate } = this.options;
    if (w.tokens > 0) return stallAfterMs;
    return stallAfterMs + Math.ceil((w.promptTokens / Math.max(0.001, minPromptRate)) * 1000);
  }

  report(now = Date.now()): ProgressReport {
    let oldest: number | null = null;
    let latest: number | null = null;
    let stalled = 0;
    let worst: { slot: number; idleMs: number; sinceMs: number; prompt: boolean } | null = null;
    // Prompts being evaluated within their bound: the model is busy with them.
    const idle = (w: SlotWork): number => now - Math.max(w.lastAt, w.excusedAt);
    const evaluating = [...this.slots].filter(([, w]) => w.tokens === 0 && idle(w) <= this.boundMs(w));
    for (const [slot, w] of this.slots) {
      oldest = oldest === null ? w.startedAt : Math.min(oldest, w.startedAt);
      latest = latest === null ? w.lastAt : Math.max(latest, w.lastAt);
      const idleMs = idle(w);
      const waiting = evaluating.some(([other]) => other !== slot);
      if (idleMs > this.boundMs(w) && !waiting) {
        stalled += 1;
        if (!worst || idleMs > worst.idleMs) worst = { slot, idleMs, sinceMs: now - w.lastAt, prompt: w.tokens === 0 };
      }
    }
    const reason = worst
      ? `slot ${worst.slot} has made no progress for ${round1(worst.sinceMs / 1000)} s ` +
        `(${worst.prompt ? 'evaluating its prompt' : 'generating'}; ${stalled} of ${this.slots.size} slots stalled)`
      : null;
    return {
      in_flight: this.slots.size,
      oldest_age_s: oldest === null ? 0 : round1((now - oldest) / 1000),
      since_progress_s: latest === null ? null : round1((now - latest) / 1000),
      stalled,
      reason,
      waiting_for_cpu: this.waitingForCpu,
    };
  }
}

/**
 * A guest's share: each source address (all of its connections together) may send at most
 * `bytesPerMinute` to the target, as a token bucket that holds one minute's worth (a burst of up
 * to a minute's bytes, then the steady rate). A guest over its share is slowed, not refused: its
 * connections stop being read until the bucket has refilled what they overdrew, so TCP's own flow
 * control holds the guest back, nothing is lost or reordered, and the relay buffers nothing more
 * (a pure byte relay cannot answer in JSON-RPC anyway). One warning per episode and source, and
 * one line when it ends.
 */
import type { Logger } from '@vigil/shared-types';

/** The default share of one source: 16 MiB a minute (two lines of the daemon's largest size). */
export const DEFAULT_BYTES_PER_MINUTE = 16 * 1024 * 1024;

interface Bucket {
  tokens: number;
  at: number;
  /** Pauses in the episode under way; 0: no episode. */
  pauses: number;
}

export class SourceBudget {
  private readonly buckets = new Map<string, Bucket>();
  private readonly perMs: number;

  constructor(
    private readonly bytesPerMinute: number,
    private readonly logger: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.perMs = bytesPerMinute / 60_000;
  }

  /**
   * Takes `bytes` from the source's share: how long (ms) its connections must not be read before
   * the overdraft is paid back; 0 while within the share. Always 0 when the budget is off.
   */
  take(source: string, bytes: number): number {
    if (this.bytesPerMinute <= 0) return 0;
    const t = this.now();
    let b = this.buckets.get(source);
    if (!b) {
      b = { tokens: this.bytesPerMinute, at: t, pauses: 0 };
      this.buckets.set(source, b);
    }
    b.tokens = Math.min(this.bytesPerMinute, b.tokens + (t - b.at) * this.perMs);
    b.at = t;
    b.tokens -= bytes;
    if (b.tokens >= 0) {
      if (b.pauses > 0) {
        this.logger.info('guest within its byte rate again', { source, pauses: b.pauses });
        b.pauses = 0;
      }
      return 0;
    }
    if (b.pauses++ === 0) {
      this.logger.warn('guest over its byte rate: reading slowed', {
        source,
        bytesPerMinute: this.bytesPerMinute,
      });
    }
    return Math.ceil(-b.tokens / this.perMs);
  }

  /** Forgets the sources whose share is whole again (called as connections close). */
  sweep(): void {
    const t = this.now();
    for (const [source, b] of this.buckets) {
      if (b.tokens + (t - b.at) * this.perMs >= this.bytesPerMinute && b.pauses === 0) this.buckets.delete(source);
    }
  }
}

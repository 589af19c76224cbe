/**
 * A storage fault of the local network (a full disk, an I/O error) as one episode: logged once
 * when it starts and once when it ends (with how many attempts failed), retried with a backoff
 * that doubles up to a ceiling, never in a loop. While it lasts the check endpoint answers 503
 * and a send answers -3.
 */
import type { Logger } from '@vigil/shared-types';

/** SQLite's codes (and the system's) for a full disk or an I/O failure. */
export const isStorageFault = (err: unknown): boolean =>
  /^(SQLITE_(IOERR|FULL)|ENOSPC$|EDQUOT$|EIO$)/.test(String((err as { code?: unknown } | null)?.code ?? ''));

export const RETRY_INITIAL_MS = 250;
export const RETRY_MAX_MS = 30_000;

export class FaultEpisode {
  private since: number | null = null;
  private failures = 0;
  private delayMs = RETRY_INITIAL_MS;
  private timer: NodeJS.Timeout | null = null;
  /** What failed, for the error replies. */
  reason: string | null = null;

  constructor(
    private readonly logger: Logger,
    /** A write that proves the storage works again; throws while it does not. */
    private readonly probe: () => void,
    /** Called once the storage works again. */
    private readonly recovered: () => void,
  ) {}

  get active(): boolean {
    return this.since !== null;
  }

  /** A failure: starts the episode (one log line) or counts in it; the probe runs after the backoff. */
  fail(err: unknown, what: string): void {
    this.failures++;
    this.reason = err instanceof Error ? err.message : String(err);
    if (this.since === null) {
      this.since = Date.now();
      this.logger.error(`${what} failed: the local network's storage is failing; retrying with backoff`, {
        error: this.reason,
        retryMaxS: RETRY_MAX_MS / 1000,
      });
    }
    this.schedule();
  }

  /** A write succeeded: the episode (if any) ends. */
  ok(): void {
    if (this.since === null) return;
    this.logger.info("the local network's storage works again", {
      failedAttempts: this.failures,
      forS: Math.round((Date.now() - this.since) / 1000),
    });
    this.since = null;
    this.failures = 0;
    this.reason = null;
    this.delayMs = RETRY_INITIAL_MS;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.recovered();
  }

  private schedule(): void {
    if (this.timer) return;
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, RETRY_MAX_MS);
    this.timer = setTimeout(() => {
      this.timer = null;
      try {
        this.probe();
      } catch (err) {
        if (isStorageFault(err)) this.fail(err, 'a write');
        else this.schedule();
        return;
      }
      this.ok();
    }, delay);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

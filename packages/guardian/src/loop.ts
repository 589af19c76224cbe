/**
 * `guardian run`: the guardian's ticks in a loop, until stopped or a person is needed.
 */

import { StateBusyError } from './errors.js';
import type { Guardian } from './guardian.js';

/** Waits `ms`, or less when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  if (ms <= 0) return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Whether the loop's ticks still run, for the service watchdog: a tick under way for longer than
 * `maxTickMs`, or none begun within the interval + `slackMs` of the last one's end, means the
 * guardian no longer does its work (a hung probe or command that its own limits did not end).
 */
export class TickClock {
  private startedAt: number | null = null;
  private endedAt: number;

  constructor(
    private readonly intervalMs: number,
    private readonly maxTickMs: number,
    private readonly slackMs = 30_000,
    now = Date.now(),
  ) {
    this.endedAt = now;
  }

  begin(now = Date.now()): void {
    this.startedAt = now;
  }

  end(now = Date.now()): void {
    this.startedAt = null;
    this.endedAt = now;
  }

  /** Why the ticks are late, or null when they run. */
  late(now = Date.now()): string | null {
    if (this.startedAt !== null) {
      const s = now - this.startedAt;
      return s > this.maxTickMs ? `a tick has been running for ${Math.round(s / 1000)} s` : null;
    }
    const idle = now - this.endedAt;
    return idle > this.intervalMs + this.slackMs ? `no tick for ${Math.round(idle / 1000)} s` : null;
  }
}

/**
 * The loop of `guardian run`: a tick every intervalS (measured from the start of each tick; a tick
 * that overran is followed at once). Returns the exit code: 2 when a person is needed, 0 when
 * `signal` stopped it. A tick that finds another guardian updating the state is skipped.
 */
export async function runLoop(
  guardian: Guardian,
  signal: AbortSignal,
  onSkip: (err: Error) => void = () => {},
  clock?: TickClock,
): Promise<number> {
  const intervalMs = guardian.config.intervalS * 1000;
  while (!signal.aborted) {
    const started = performance.now();
    clock?.begin();
    try {
      const exit = await guardian.tick(signal);
      if (exit !== null) return exit;
    } catch (err) {
      if (!(err instanceof StateBusyError)) throw err;
      onSkip(err);
    } finally {
      clock?.end();
    }
    await sleep(intervalMs - (performance.now() - started), signal);
  }
  return 0;
}

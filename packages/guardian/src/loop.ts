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
 * The loop of `guardian run`: a tick every intervalS (measured from the start of each tick; a tick
 * that overran is followed at once). Returns the exit code: 2 when a person is needed, 0 when
 * `signal` stopped it. A tick that finds another guardian updating the state is skipped.
 */
export async function runLoop(
  guardian: Guardian,
  signal: AbortSignal,
  onSkip: (err: Error) => void = () => {},
): Promise<number> {
  const intervalMs = guardian.config.intervalS * 1000;
  while (!signal.aborted) {
    const started = performance.now();
    try {
      const exit = await guardian.tick(signal);
      if (exit !== null) return exit;
    } catch (err) {
      if (!(err instanceof StateBusyError)) throw err;
      onSkip(err);
    }
    await sleep(intervalMs - (performance.now() - started), signal);
  }
  return 0;
}

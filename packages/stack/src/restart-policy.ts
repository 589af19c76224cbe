/**
 * When the supervisor starts again a service that exited by itself: the policy of the installed
 * units (systemd `Restart=always` with `RestartPreventExitStatus=2 78`, launchd `KeepAlive`), with
 * a backoff as systemd's `RestartSteps=` gives where it exists: 1 s, doubling on each exit in a
 * row up to 30 s; a service that stayed up 60 s starts the count again. Never after exit 2
 * (manual intervention required) or 78 (bad usage or configuration): a restart cannot fix them.
 * Pure: the supervisor keeps the count and runs the timer.
 */
import { ExitCode } from '@vigil/shared-types/light';

export interface RestartPolicy {
  /** The delay before the first restart of a run of failures. */
  readonly firstDelayMs: number;
  /** The longest delay. */
  readonly maxDelayMs: number;
  /** A process that stayed up this long had a good run: the next exit is the first again. */
  readonly resetAfterMs: number;
}

export const RESTART_POLICY: RestartPolicy = { firstDelayMs: 1000, maxDelayMs: 30_000, resetAfterMs: 60_000 };

/** The exit statuses after which nothing is restarted. */
export const FINAL_EXIT_CODES: readonly number[] = [ExitCode.MANUAL, ExitCode.CONFIG];

export type RestartDecision =
  /** `attempt`: which restart of this run of failures it is (1, 2, …). */
  | { readonly restart: true; readonly delayMs: number; readonly attempt: number }
  | { readonly restart: false; readonly reason: string };

/**
 * What to do about a service that exited by itself after `upMs`, when `failures` exits in a row
 * came before this one (0: none, or the last run was a good one).
 */
export function decideRestart(
  exit: { readonly code: number | null; readonly signal: string | null },
  upMs: number,
  failures: number,
  policy: RestartPolicy = RESTART_POLICY,
): RestartDecision {
  if (exit.signal === null && exit.code !== null && FINAL_EXIT_CODES.includes(exit.code)) {
    return {
      restart: false,
      reason:
        exit.code === ExitCode.MANUAL
          ? 'exit 2 means manual intervention required'
          : 'exit 78 means bad usage or configuration, which a restart cannot fix',
    };
  }
  const n = upMs >= policy.resetAfterMs ? 1 : failures + 1;
  const delayMs = Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** Math.min(n - 1, 30));
  return { restart: true, delayMs, attempt: n };
}

/** How an exit is said: `signal SIGKILL`, `code 1`. */
export const describeExit = (exit: { readonly code: number | null; readonly signal: string | null }): string =>
  exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;

/**
 * The health check's error catalogue and errors. Every one ends a run with exit 3, "the check
 * could not run" (as a Nagios plugin's UNKNOWN): another run holds the lock, bad configuration,
 * bad usage.
 */
import { ConfigError, ConfigValidationError, defineErrors, HealthExit, VigilError } from '@vigil/shared-types';

export { ConfigError, ConfigValidationError };

export const HEALTH_ERRORS = defineErrors({
  VIGIL_ERR_HEALTH_LOCKED: {
    message: 'another health check run holds the lock',
    hint: 'the lock clears when that run ends',
    exitCode: HealthExit.UNKNOWN,
  },
  VIGIL_ERR_HEALTH_NOT_RUN: {
    message: 'the check could not run (bad usage or configuration, the lock, an unreadable file)',
    exitCode: HealthExit.UNKNOWN,
  },
});

/** Another run holds the lock: this one cannot run (exit 3). */
export class LockedError extends VigilError {
  constructor(readonly pid: number | null) {
    super(HEALTH_ERRORS.VIGIL_ERR_HEALTH_LOCKED, `another health check${pid ? ` (pid ${pid})` : ''} is running`);
  }
}

/**
 * The check could not run at all (exit 3): wraps what stopped it (a configuration error ends other
 * binaries with 78, but a monitoring plugin says 3), keeping its message and hint; its own code is
 * in `cause`.
 */
export class NotRunError extends VigilError {
  constructor(cause: unknown) {
    const hint = (cause as { hint?: unknown } | null)?.hint;
    super(HEALTH_ERRORS.VIGIL_ERR_HEALTH_NOT_RUN, cause instanceof Error ? cause.message : String(cause), {
      hint: typeof hint === 'string' ? hint : undefined,
      cause,
    });
  }

  static of(err: unknown): NotRunError {
    return err instanceof NotRunError ? err : new NotRunError(err);
  }
}

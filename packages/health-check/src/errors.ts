/**
 * The health check's errors. Every one ends a run with exit 3, "the check could not run" (as a
 * Nagios plugin's UNKNOWN): another run holds the lock, bad configuration, bad usage.
 */
import { ConfigError, ConfigValidationError, HealthExit, VigilError } from '@vigil/shared-types';

export { ConfigError, ConfigValidationError };

/** Another run holds the lock: this one cannot run (exit 3). */
export class LockedError extends VigilError {
  constructor(readonly pid: number | null) {
    super('EBUSY', `another health check${pid ? ` (pid ${pid})` : ''} is running`, {
      hint: 'the lock clears when that run ends',
      exitCode: HealthExit.UNKNOWN,
    });
  }
}

/**
 * The check could not run at all (exit 3): wraps what stopped it (a configuration error ends other
 * binaries with 78, but a monitoring plugin says 3), keeping its code, message and hint.
 */
export class NotRunError extends VigilError {
  constructor(cause: unknown) {
    const e = cause as { code?: unknown; hint?: unknown } | null;
    super(typeof e?.code === 'string' ? e.code : 'ENOTRUN', cause instanceof Error ? cause.message : String(cause), {
      hint: typeof e?.hint === 'string' ? e.hint : undefined,
      exitCode: HealthExit.UNKNOWN,
      cause,
    });
  }

  static of(err: unknown): NotRunError {
    return err instanceof NotRunError ? err : new NotRunError(err);
  }
}

/**
 * The guardian's errors, each a VigilError: a stable `code`, a message a person reads, and the
 * exit code the binary ends with (configuration 78, manual intervention 2, a runtime failure 1).
 */
import { ConfigError, ExitCode, VigilError } from '@vigil/shared-types';

/** A configuration file that cannot be used: missing, not JSON, or invalid (exit 78). */
export class ConfigFileError extends ConfigError {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
  }
}

/** An operation the configuration does not give what it needs (exit 78). */
export class NotConfiguredError extends VigilError {
  constructor(message: string) {
    super('ENOTCONFIGURED', message, { exitCode: ExitCode.CONFIG });
  }
}

/**
 * The state file exists but cannot be used. `recoverable`: damaged (empty, not JSON, a field of
 * the wrong type): the guardian moves it aside and goes on from a fresh state (`state_reset`).
 * Not recoverable (written by a newer guardian): a person must look (exit 2).
 */
export class StateFileError extends VigilError {
  constructor(
    readonly path: string,
    readonly why: string,
    readonly recoverable = true,
  ) {
    super(
      'ESTATE',
      `state file ${path} ${why}; fix it, or remove it to start afresh (its alerting state is then lost)`,
      {
        exitCode: ExitCode.MANUAL,
      },
    );
  }
}

/** Another guardian holds the state lock longer than we can wait (exit 1; `run` skips the tick). */
export class StateBusyError extends VigilError {
  constructor(
    readonly path: string,
    readonly pid: number | null,
  ) {
    super('EBUSY', `another guardian${pid ? ` (pid ${pid})` : ''} is updating ${path}; try again`);
  }
}

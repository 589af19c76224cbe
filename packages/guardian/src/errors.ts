/**
 * The guardian's error catalogue and errors, each a VigilError: a stable `code`, a message a
 * person reads, and the exit code the binary ends with (configuration 78, manual intervention 2,
 * a runtime failure 1). A configuration file that cannot be used is the shared VIGIL_ERR_CONFIG.
 */
import { ConfigError, defineErrors, ExitCode, VigilError } from '@vigil/shared-types';

export const GUARDIAN_ERRORS = defineErrors({
  VIGIL_ERR_GUARDIAN_NOT_CONFIGURED: {
    message: 'an operation the configuration does not give what it needs',
    exitCode: ExitCode.CONFIG,
  },
  VIGIL_ERR_GUARDIAN_STATE: {
    message: 'the state file cannot be used (damaged, or written by a newer guardian)',
    exitCode: ExitCode.MANUAL,
  },
  VIGIL_ERR_GUARDIAN_STATE_BUSY: { message: 'another guardian holds the state lock longer than this one can wait' },
});

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
    super(GUARDIAN_ERRORS.VIGIL_ERR_GUARDIAN_NOT_CONFIGURED, message);
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
      GUARDIAN_ERRORS.VIGIL_ERR_GUARDIAN_STATE,
      `state file ${path} ${why}; fix it, or remove it to start afresh (its alerting state is then lost)`,
    );
  }
}

/** Another guardian holds the state lock longer than we can wait (exit 1; `run` skips the tick). */
export class StateBusyError extends VigilError {
  constructor(
    readonly path: string,
    readonly pid: number | null,
  ) {
    super(
      GUARDIAN_ERRORS.VIGIL_ERR_GUARDIAN_STATE_BUSY,
      `another guardian${pid ? ` (pid ${pid})` : ''} is updating ${path}; try again`,
    );
  }
}

/**
 * The stack's error catalogue and errors, each a VigilError: a stable code, a message, an optional
 * hint and the exit code `vigil` ends with when the error ends it.
 */
import { defineErrors, ExitCode, VigilError } from '@vigil/shared-types/light';

/** `vigil` ends with 3 when no stack runs from the home it was given (as `ctl.mjs` did). */
export const EXIT_NO_STACK = 3;

export const STACK_ERRORS = defineErrors({
  VIGIL_ERR_STACK_USAGE: {
    message: 'bad usage of a command (an unknown service, a bad count)',
    exitCode: ExitCode.CONFIG,
  },
  VIGIL_ERR_STACK_START: { message: 'the stack could not start: a port in use, a service that did not come up' },
  VIGIL_ERR_STACK_RUNNING: { message: 'a supervisor already runs from this home' },
  VIGIL_ERR_STACK_NO_STACK: { message: "no supervisor answers on the home's control socket", exitCode: EXIT_NO_STACK },
  VIGIL_ERR_STACK_CONTROL: { message: 'the supervisor refused a request, or its answer could not be read' },
  VIGIL_ERR_STACK_NO_LOG: {
    message: 'vigil logs of a log that does not exist yet',
    hint: 'the service has not been started from this home',
  },
  VIGIL_ERR_STACK_WRITE: { message: 'vigil request-restart cannot write its request file (its directory must exist)' },
});

/** Bad usage of a command (an unknown service, a bad count): exit 78 like every vigil binary. */
export class UsageError extends VigilError {
  constructor(message: string, hint?: string) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_USAGE, message, { hint });
  }
}

/** The stack could not start: a port in use, a service that did not come up, a model not made. */
export class StartError extends VigilError {
  constructor(message: string, options: { hint?: string; cause?: unknown } = {}) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_START, message, options);
  }
}

/** A second supervisor on a home that already has one. */
export class AlreadyRunningError extends VigilError {
  constructor(
    readonly home: string,
    readonly pid: number,
  ) {
    super(
      STACK_ERRORS.VIGIL_ERR_STACK_RUNNING,
      `vigil is already running from ${home} (pid ${pid}); stop it with Ctrl-C in its terminal or kill -TERM ${pid}`,
    );
  }
}

/** No supervisor answers on the home's control socket. */
export class NoStackError extends VigilError {
  constructor(home: string, reason: string) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_NO_STACK, `no vigil stack is running from ${home} (${reason})`);
  }
}

/** The supervisor refused a request, or its answer could not be read. */
export class ControlError extends VigilError {
  constructor(message: string) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_CONTROL, message);
  }
}

/** `vigil request-restart` cannot write its request file. */
export class WriteError extends VigilError {
  constructor(message: string, cause?: unknown) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_WRITE, message, { cause });
  }
}

/** `vigil logs` of a log that does not exist (yet). */
export class NoLogError extends VigilError {
  constructor(file: string) {
    super(STACK_ERRORS.VIGIL_ERR_STACK_NO_LOG, `no log yet at ${file}`);
  }
}

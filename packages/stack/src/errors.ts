/**
 * The stack's errors, each a VigilError: a stable code, a message, an optional hint and the exit
 * code `vigil` ends with when the error ends it.
 */
import { ExitCode, VigilError } from '@vigil/shared-types/light';

/** `vigil` ends with 3 when no stack runs from the home it was given (as `ctl.mjs` did). */
export const EXIT_NO_STACK = 3;

/** Bad usage of a command (an unknown service, a bad count): exit 78 like every vigil binary. */
export class UsageError extends VigilError {
  constructor(message: string, hint?: string) {
    super('EUSAGE', message, { hint, exitCode: ExitCode.CONFIG });
  }
}

/** The stack could not start: a port in use, a service that did not come up, a model not made. */
export class StartError extends VigilError {
  constructor(message: string, options: { hint?: string; cause?: unknown } = {}) {
    super('ESTART', message, options);
  }
}

/** A second supervisor on a home that already has one. */
export class AlreadyRunningError extends VigilError {
  constructor(
    readonly home: string,
    readonly pid: number,
  ) {
    super(
      'ERUNNING',
      `vigil is already running from ${home} (pid ${pid}); stop it with Ctrl-C in its terminal or kill -TERM ${pid}`,
    );
  }
}

/** No supervisor answers on the home's control socket. */
export class NoStackError extends VigilError {
  constructor(home: string, reason: string) {
    super('ENOSTACK', `no vigil stack is running from ${home} (${reason})`, { exitCode: EXIT_NO_STACK });
  }
}

/** The supervisor refused a request, or its answer could not be read. */
export class ControlError extends VigilError {
  constructor(message: string) {
    super('ECONTROL', message);
  }
}

/** `vigil logs` of a log that does not exist (yet). */
export class NoLogError extends VigilError {
  constructor(file: string) {
    super('ENOLOG', `no log yet at ${file}`, { hint: 'the service has not been started from this home' });
  }
}

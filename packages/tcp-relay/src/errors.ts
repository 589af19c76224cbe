/**
 * The relay's errors, derived from the one base class (`VigilError`: a stable `code`, a message,
 * an optional hint, the exit code a binary ends with).
 */
import { ExitCode, formatHostPort, type HostPort, VigilError } from '@vigil/shared-types';

/**
 * A bind failure that waiting cannot fix (port in use, permission): the CLI exits 1 with it.
 * Its code is the system's (`EADDRINUSE`, `EACCES`, …).
 */
export class BindError extends VigilError {
  constructor(addr: HostPort, cause: NodeJS.ErrnoException) {
    const reason =
      cause.code === 'EADDRINUSE'
        ? 'address already in use'
        : cause.code === 'EACCES'
          ? 'permission denied'
          : (cause.message ?? String(cause));
    super(cause.code ?? 'EBIND', `cannot listen on ${formatHostPort(addr)}: ${reason}`, { cause });
  }
}

/** A CIDR that cannot be read (a bad --allow): bad usage, exit 78. */
export class CidrError extends VigilError {
  constructor(message: string) {
    super('ECIDR', message, { exitCode: ExitCode.CONFIG });
  }
}

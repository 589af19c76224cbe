/**
 * The relay's errors, derived from the one base class (`VigilError`: a stable `code`, a message,
 * an optional hint, the exit code a binary ends with). A listen failure is the shared ListenError.
 */
import { ExitCode, VigilError } from '@vigil/shared-types';

/** A CIDR that cannot be read (a bad --allow): bad usage, exit 78. */
export class CidrError extends VigilError {
  constructor(message: string) {
    super('ECIDR', message, { exitCode: ExitCode.CONFIG });
  }
}

/**
 * The relay's error catalogue and errors, derived from the one base class (`VigilError`: a stable
 * `code`, a message, an optional hint, the exit code a binary ends with). What the filter refuses
 * is answered to the guest as a JSON-RPC error with the code the daemon would give (`rpc`).
 */
import { defineErrors, ExitCode, RpcErrorCode, VigilError } from '@vigil/shared-types';

export const RELAY_ERRORS = defineErrors({
  VIGIL_ERR_RELAY_CIDR: { message: 'a CIDR that cannot be read (a bad --allow)', exitCode: ExitCode.CONFIG },
  VIGIL_ERR_RELAY_REFUSED_METHOD: {
    message: 'a method the relay does not let a guest call (it could take over the account)',
    rpc: RpcErrorCode.METHOD_NOT_FOUND,
  },
  VIGIL_ERR_RELAY_FILE_PATH: {
    message: 'a parameter naming a file on the host rather than a data: URI',
    rpc: RpcErrorCode.INVALID_PARAMS,
  },
  VIGIL_ERR_RELAY_UNREADABLE: {
    message: 'a line that could hold a refused method but cannot be read as JSON',
    rpc: RpcErrorCode.PARSE_ERROR,
  },
  VIGIL_ERR_RELAY_BATCH_REFUSED: {
    message: 'a batch refused as a whole because it holds a refused request',
    rpc: RpcErrorCode.INVALID_REQUEST,
  },
});

/** A CIDR that cannot be read (a bad --allow): bad usage, exit 78. */
export class CidrError extends VigilError {
  constructor(message: string) {
    super(RELAY_ERRORS.VIGIL_ERR_RELAY_CIDR, message);
  }
}

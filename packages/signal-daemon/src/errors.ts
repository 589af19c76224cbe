/**
 * The daemon's errors, all derived from the one base class (`VigilError`: a stable `code`, a
 * message, an optional hint, the exit code a binary ends with).
 */
import { ConfigError, type JsonRpcErrorObject, RpcErrorCode, rpcError, VigilError } from '@vigil/shared-types';

/** A listener that cannot be opened (port in use, address not on the host): the CLI exits 1. */
export { ListenError } from '@vigil/shared-types/node';
/** A start-up or configuration error: the CLI prints its message in one line and exits 78. */
export { ConfigError };

const RPC_CODE_NAMES = new Map<number, string>(Object.entries(RpcErrorCode).map(([name, code]) => [code, name]));

/**
 * A JSON-RPC error a method raises on purpose: its JSON-RPC code (`rpcCode`), message and data
 * reach the client as they are. Its `code` is the stable name of that JSON-RPC code, e.g.
 * `RPC_INVALID_PARAMS` (`RPC_-7` for a code signal-cli invents).
 */
export class RpcFailure extends VigilError {
  constructor(
    readonly rpcCode: number,
    message: string,
    readonly data: unknown = null,
  ) {
    super(`RPC_${RPC_CODE_NAMES.get(rpcCode) ?? rpcCode}`, message);
  }

  toObject(): JsonRpcErrorObject {
    return rpcError(this.rpcCode, this.message, this.data);
  }
}

export const invalidParams = (message: string): RpcFailure =>
  new RpcFailure(RpcErrorCode.INVALID_PARAMS, `Invalid params: ${message}`);

export const userError = (message: string, data: unknown = null): RpcFailure =>
  new RpcFailure(RpcErrorCode.USER_ERROR, message, data);

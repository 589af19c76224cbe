import { type JsonRpcErrorObject, RpcErrorCode, rpcError } from '@vigil/shared-types';

/** A JSON-RPC error a method raises on purpose: code, message and data reach the client as they are. */
export class RpcFailure extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: unknown = null,
  ) {
    super(message);
    this.name = 'RpcFailure';
  }

  toObject(): JsonRpcErrorObject {
    return rpcError(this.code, this.message, this.data);
  }
}

export const invalidParams = (message: string): RpcFailure =>
  new RpcFailure(RpcErrorCode.INVALID_PARAMS, `Invalid params: ${message}`);

export const userError = (message: string, data: unknown = null): RpcFailure =>
  new RpcFailure(RpcErrorCode.USER_ERROR, message, data);

/** A start-up or configuration error: the CLI prints its message in one line and exits 78. */
export class ConfigError extends Error {
  readonly code = 'ECONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

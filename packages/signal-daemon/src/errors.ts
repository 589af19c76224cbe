/**
 * The daemon's error catalogue and errors, all derived from the one base class (`VigilError`: a
 * stable `code`, a message, an optional hint, the exit code a binary ends with). A JSON-RPC error
 * keeps signal-cli's code (`rpc`), which is what its clients test; its `code` names it.
 */
import {
  ConfigError,
  defineErrors,
  type JsonRpcErrorObject,
  RpcErrorCode,
  rpcError,
  VigilError,
} from '@vigil/shared-types';

/** A listener that cannot be opened (port in use, address not on the host): the CLI exits 1. */
export { ListenError } from '@vigil/shared-types/node';
/** A start-up or configuration error: the CLI prints its message in one line and exits 78. */
export { ConfigError };

export const DAEMON_ERRORS = defineErrors({
  VIGIL_ERR_DAEMON_STORE: {
    message: 'the local network or the inbox cannot be opened: a lock held too long or a failing disk (retried)',
  },
  VIGIL_ERR_DAEMON_PARSE_ERROR: { message: 'a request that is not JSON', rpc: RpcErrorCode.PARSE_ERROR },
  VIGIL_ERR_DAEMON_METHOD_NOT_FOUND: {
    message: 'a method the daemon does not implement',
    rpc: RpcErrorCode.METHOD_NOT_FOUND,
  },
  VIGIL_ERR_DAEMON_INVALID_PARAMS: {
    message: 'a parameter missing, of the wrong type or refused',
    rpc: RpcErrorCode.INVALID_PARAMS,
  },
  VIGIL_ERR_DAEMON_INTERNAL_ERROR: {
    message: 'a fault in the daemon while it answered',
    rpc: RpcErrorCode.INTERNAL_ERROR,
  },
  VIGIL_ERR_DAEMON_USER_ERROR: {
    message: 'what signal-cli calls a user error: not registered, every recipient failed, an unknown group',
    rpc: RpcErrorCode.USER_ERROR,
  },
  VIGIL_ERR_DAEMON_IO_ERROR: {
    message: 'the backend is not serving (signal-cli restarting, storage failing, shutting down)',
    rpc: RpcErrorCode.IO_ERROR,
  },
  VIGIL_ERR_DAEMON_UNTRUSTED_IDENTITY: {
    message: "a recipient's identity key changed and is not trusted",
    rpc: RpcErrorCode.UNTRUSTED_IDENTITY,
  },
  VIGIL_ERR_DAEMON_RPC_OTHER: { message: 'an error signal-cli answered with a code of its own, passed on as it is' },
});

const RPC_FAILURES = Object.values(DAEMON_ERRORS).filter((e) => e.rpc !== undefined);

/**
 * A JSON-RPC error a method raises on purpose: its JSON-RPC code (`rpcCode`), message and data
 * reach the client as they are. Its `code` is the catalogue's name of that JSON-RPC code, e.g.
 * `VIGIL_ERR_DAEMON_INVALID_PARAMS`; VIGIL_ERR_DAEMON_RPC_OTHER for a code signal-cli invents.
 */
export class RpcFailure extends VigilError {
  constructor(
    readonly rpcCode: number,
    message: string,
    readonly data: unknown = null,
  ) {
    super(RPC_FAILURES.find((e) => e.rpc === rpcCode) ?? DAEMON_ERRORS.VIGIL_ERR_DAEMON_RPC_OTHER, message);
  }

  toObject(): JsonRpcErrorObject {
    return rpcError(this.rpcCode, this.message, this.data);
  }
}

export const invalidParams = (message: string): RpcFailure =>
  new RpcFailure(RpcErrorCode.INVALID_PARAMS, `Invalid params: ${message}`);

export const userError = (message: string, data: unknown = null): RpcFailure =>
  new RpcFailure(RpcErrorCode.USER_ERROR, message, data);

/** The store cannot be opened for a fault that waiting may fix (exit 1, the service manager retries). */
export class StoreError extends VigilError {
  constructor(message: string) {
    super(DAEMON_ERRORS.VIGIL_ERR_DAEMON_STORE, message);
  }
}

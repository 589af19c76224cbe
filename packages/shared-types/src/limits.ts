/** The JSON-RPC reply to a request over a size limit, the same from every listener. */
import { failure, type JsonRpcFailure, RpcErrorCode, rpcError } from './jsonrpc.js';

/**
 * -32600 "Request too large: a line may hold at most N bytes" (a newline-delimited listener) or
 * "… the body may hold at most N bytes" (HTTP); its id is null (the request was not read).
 */
export function requestTooLarge(unit: 'line' | 'body', limit: number): JsonRpcFailure {
  const what = unit === 'line' ? 'a line' : 'the body';
  return failure(
    null,
    rpcError(RpcErrorCode.INVALID_REQUEST, `Request too large: ${what} may hold at most ${limit} bytes`),
  );
}

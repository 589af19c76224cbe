/** The JSON-RPC reply to a request over a size limit, the same from every listener. */
import { failure, type JsonRpcErrorObject, type JsonRpcFailure, RpcErrorCode, rpcError } from './jsonrpc.js';

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

/**
 * The messaging side's size limits, in bytes of UTF-8 (or a count), with their defaults: what one
 * call may carry into the daemon (and so into the local network's file and every consumer's
 * stream). Each is checked before the call reaches a backend; a value over its limit is a -32602
 * naming the parameter. Documented in the signal-daemon and tcp-relay READMEs (Security).
 */
export const MESSAGING_LIMITS = {
  /** A message body (`message`, and a quoted message's text): Signal Desktop's own bound. */
  messageBytes: 64 * 1024,
  /** Attachments of one call (`attachment`/`attachments`). Each one's bytes: the body/line limit. */
  attachments: 32,
  /** A name: a group's, a profile's given/family name, a contact's names. */
  nameBytes: 1024,
  /** A group's description, a contact's note, a link preview's title or description. */
  descriptionBytes: 8 * 1024,
  /** A profile's about text and about emoji. */
  aboutBytes: 2 * 1024,
  /** A poll's question and each of its options, a sticker's or a reaction's text. */
  shortTextBytes: 2 * 1024,
  /** Requests in one JSON-RPC batch (HTTP body or TCP line). Its bytes: the body/line limit. */
  batchRequests: 1000,
} as const;

/** -32602 "Invalid params: `name` is too long: N bytes, at most M", naming the parameter as sent. */
export function paramTooLarge(name: string, size: number, limit: number, unit = 'bytes'): JsonRpcErrorObject {
  return rpcError(
    RpcErrorCode.INVALID_PARAMS,
    `Invalid params: ${name} is too large: ${size} ${unit}, at most ${limit}`,
    { param: name, size, limit },
  );
}

/** -32600 for a batch of more requests than the limit; its id is null (nothing of it was run). */
export function batchTooLarge(count: number, limit: number): JsonRpcFailure {
  return failure(
    null,
    rpcError(RpcErrorCode.INVALID_REQUEST, `Batch too large: ${count} requests, at most ${limit} in one batch`, {
      count,
      limit,
    }),
  );
}

/**
 * JSON-RPC 2.0 as the messaging daemon speaks it (compatible with signal-cli 0.13.19's daemon):
 * types, signal-cli's error codes, and the pure classification of what a client sent.
 */

export type JsonRpcId = string | number | null;

export interface JsonRpcRequest<P = unknown> {
  readonly jsonrpc: '2.0';
  readonly method: string;
  readonly params?: P;
  /** Absent for a notification; an explicit `null` is a call whose reply has id null. */
  readonly id?: JsonRpcId;
}

export interface JsonRpcErrorObject {
  readonly code: number;
  readonly message: string;
  /** null, or details (for example the partial result of a send that failed for everyone). */
  readonly data: unknown;
}

export interface JsonRpcSuccess<R = unknown> {
  readonly jsonrpc: '2.0';
  readonly result: R;
  readonly id: JsonRpcId;
}

export interface JsonRpcFailure {
  readonly jsonrpc: '2.0';
  readonly error: JsonRpcErrorObject;
  readonly id: JsonRpcId;
}

export type JsonRpcResponse<R = unknown> = JsonRpcSuccess<R> | JsonRpcFailure;

/** A server-to-client notification, such as `receive`. */
export interface JsonRpcNotification<P = unknown> {
  readonly jsonrpc: '2.0';
  readonly method: string;
  readonly params?: P;
}

/** signal-cli's JSON-RPC error codes. */
export const RpcErrorCode = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  /** A user error, e.g. the account is not registered or every recipient failed. */
  USER_ERROR: -1,
  IO_ERROR: -3,
  UNTRUSTED_IDENTITY: -4,
  RATE_LIMIT: -5,
} as const;

export type RpcErrorCode = (typeof RpcErrorCode)[keyof typeof RpcErrorCode];

export function rpcError(code: number, message: string, data: unknown = null): JsonRpcErrorObject {
  return { code, message, data };
}

export function success<R>(id: JsonRpcId, result: R): JsonRpcSuccess<R> {
  return { jsonrpc: '2.0', result, id };
}

export function failure(id: JsonRpcId, error: JsonRpcErrorObject): JsonRpcFailure {
  return { jsonrpc: '2.0', error, id };
}

/** One element of what a client sent, classified. */
export type Incoming =
  /** A call: a reply is due, with this id (which may be null). */
  | { readonly kind: 'call'; readonly id: JsonRpcId; readonly method: string; readonly params: unknown }
  /** A notification: no id member, no reply. */
  | { readonly kind: 'notification'; readonly method: string; readonly params: unknown }
  /** Not a valid request: an error reply is due, with the request's id when it had a usable one. */
  | { readonly kind: 'invalid'; readonly id: JsonRpcId; readonly error: JsonRpcErrorObject };

/** A whole message (an HTTP body, a TCP line), classified. */
export type ParsedMessage =
  | { readonly kind: 'single'; readonly item: Incoming }
  | { readonly kind: 'batch'; readonly items: readonly Incoming[] }
  /** Nothing usable (parse error, empty batch): exactly one error reply with id null. */
  | { readonly kind: 'error'; readonly error: JsonRpcErrorObject };

function isId(v: unknown): v is JsonRpcId {
  return v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Classifies one parsed JSON value as a call, a notification or an invalid request. */
export function classify(value: unknown): Incoming {
  if (!isPlainObject(value)) return invalidRequest(null, 'request must be a JSON object');
  const hasId = Object.hasOwn(value, 'id');
  const id = hasId && isId(value.id) ? value.id : null;
  if (hasId && !isId(value.id)) return invalidRequest(id, 'id must be a string, a number or null');
  if (value.jsonrpc !== '2.0') return invalidRequest(id, 'only jsonrpc version 2.0 is supported');
  if (typeof value.method !== 'string' || value.method === '') return invalidRequest(id, 'method field must be set');
  // As signal-cli: a null params member is treated as absent.
  const params = value.params === null ? undefined : value.params;
  if (params !== undefined && typeof params !== 'object') {
    return invalidRequest(id, 'params must be an object or an array');
  }
  return hasId
    ? { kind: 'call', id, method: value.method, params }
    : { kind: 'notification', method: value.method, params };
}

function invalidRequest(id: JsonRpcId, message: string): Incoming {
  return { kind: 'invalid', id, error: rpcError(RpcErrorCode.INVALID_REQUEST, message) };
}

/** Classifies an already-parsed JSON value: one request, or a batch. */
export function classifyMessage(value: unknown): ParsedMessage {
  if (Array.isArray(value)) {
    if (value.length === 0) {
      return { kind: 'error', error: rpcError(RpcErrorCode.INVALID_REQUEST, 'empty batch') };
    }
    return { kind: 'batch', items: value.map(classify) };
  }
  return { kind: 'single', item: classify(value) };
}

/**
 * Parses and classifies one message. An empty or blank text is a parse error with the message
 * "Empty input line", as signal-cli answers an empty TCP line.
 */
export function parseMessage(text: string): ParsedMessage {
  if (text.trim() === '') {
    return { kind: 'error', error: rpcError(RpcErrorCode.PARSE_ERROR, 'Empty input line') };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return { kind: 'error', error: rpcError(RpcErrorCode.PARSE_ERROR, `Parse error: ${detail}`) };
  }
  return classifyMessage(value);
}

/** True when the value has the shape of a JSON-RPC response (success or failure). */
export function isResponse(value: unknown): value is JsonRpcResponse {
  if (!isPlainObject(value) || value.jsonrpc !== '2.0' || !Object.hasOwn(value, 'id') || !isId(value.id)) {
    return false;
  }
  if (Object.hasOwn(value, 'result')) return !Object.hasOwn(value, 'error');
  const e = value.error;
  return isPlainObject(e) && typeof e.code === 'number' && typeof e.message === 'string';
}

/**
 * The messaging daemon's client over its HTTP transport (DESIGN.md 2.2): JSON-RPC calls and
 * batches on `POST /api/v1/rpc`, and its check on `GET /api/v1/check`, on vigil's one HTTP client
 * (`Wire`: time limit, size limit and connections in one place). A call answered with a JSON-RPC
 * error rejects with a `JsonRpcCallError` carrying the error's code, message and data; a call that
 * got no usable answer rejects with a `WireError`.
 */
import { VIGIL_ERRORS, VigilError } from '../errors.js';
import type { JsonRpcErrorObject } from '../jsonrpc.js';
import type { DaemonStatus } from '../messaging.js';
import { DAEMON_PATHS, type HostPort } from '../net.js';
import {
  type CallOptions,
  type HttpReply,
  replyJson,
  unexpectedStatus,
  Wire,
  WireError,
  type WireLimits,
} from './wire-http.js';

/** A JSON-RPC error answer to a call: `rpcCode` is the JSON-RPC code (signal-cli's: -32602, -1, -5, …). */
export class JsonRpcCallError extends VigilError {
  readonly method: string;
  readonly rpcCode: number;
  /** The error's own message, as the daemon wrote it. */
  readonly rpcMessage: string;
  readonly data: unknown;

  constructor(method: string, error: JsonRpcErrorObject) {
    super(VIGIL_ERRORS.VIGIL_ERR_WIRE_RPC_ERROR, `${method}: error ${error.code}: ${error.message}`);
    this.method = method;
    this.rpcCode = error.code;
    this.rpcMessage = error.message;
    this.data = error.data ?? null;
  }
}

export interface RpcCall {
  readonly method: string;
  readonly params?: unknown;
}

/** One answer of a batch, in the order of the calls. */
export type BatchAnswer<R = unknown> =
  | { readonly ok: true; readonly result: R }
  | { readonly ok: false; readonly error: JsonRpcCallError };

type Reply = { id?: unknown; result?: unknown; error?: JsonRpcErrorObject };

const isReply = (v: unknown): v is Reply =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && ('result' in v || 'error' in v);

export class DaemonClient {
  readonly wire: Wire;
  private nextId = 1;

  constructor(address: HostPort, limits: WireLimits = {}) {
    this.wire = new Wire({ address }, { userAgent: 'vigil', ...limits });
  }

  /** `http://HOST:PORT/api/v1/rpc`, for messages. */
  get rpcUrl(): string {
    return `${this.wire.origin}${DAEMON_PATHS.rpc}`;
  }

  /** POSTs a JSON-RPC body; the reply that must be HTTP 200 with JSON. */
  private async post(body: unknown, what: string, o: CallOptions): Promise<unknown> {
    const reply = await this.wire.request({
      method: 'POST',
      path: DAEMON_PATHS.rpc,
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      timeoutMs: o.timeoutMs,
      signal: o.signal,
    });
    if (reply.status !== 200) throw unexpectedStatus(reply, what);
    return replyJson(reply, `the reply to ${what}`);
  }

  /** Calls `method`; its result, or a JsonRpcCallError with the daemon's error. */
  async rpc<R = unknown>(method: string, params?: unknown, o: CallOptions = {}): Promise<R> {
    const reply = await this.post(
      { jsonrpc: '2.0', method, ...(params === undefined ? {} : { params }), id: this.nextId++ },
      method,
      o,
    );
    if (!isReply(reply)) throw new WireError('bad_reply', `the reply to ${method} is not a JSON-RPC reply`);
    if (reply.error) throw new JsonRpcCallError(method, reply.error);
    return reply.result as R;
  }

  /** Several calls in one request (a JSON-RPC batch); the answers in the order of the calls. */
  async batch<R = unknown>(calls: readonly RpcCall[], o: CallOptions = {}): Promise<BatchAnswer<R>[]> {
    if (calls.length === 0) return [];
    const first = this.nextId;
    this.nextId += calls.length;
    const body = calls.map((c, i) => ({
      jsonrpc: '2.0',
      method: c.method,
      ...(c.params === undefined ? {} : { params: c.params }),
      id: first + i,
    }));
    const replies = await this.post(body, `a batch of ${calls.length}`, o);
    if (!Array.isArray(replies)) throw new WireError('bad_reply', 'the reply to a batch is not an array');
    const byId = new Map<unknown, Reply>(replies.filter(isReply).map((r) => [r.id, r]));
    return calls.map((c, i): BatchAnswer<R> => {
      const r = byId.get(first + i);
      if (!r) throw new WireError('bad_reply', `the batch reply has no answer to ${c.method} (id ${first + i})`);
      return r.error
        ? { ok: false, error: new JsonRpcCallError(c.method, r.error) }
        : { ok: true, result: r.result as R };
    });
  }

  /** GET /api/v1/check: true when the daemon and its backend serve (200), false on 503. */
  async check(o: CallOptions = {}): Promise<boolean> {
    const reply = await this.getCheck(false, o);
    if (reply.status === 200) return true;
    if (reply.status === 503) return false;
    throw unexpectedStatus(reply, DAEMON_PATHS.check);
  }

  /** The daemon's JSON status (`Accept: application/json` on its check), and whether it serves (200) or not (503). */
  async status(o: CallOptions = {}): Promise<{ serving: boolean; status: DaemonStatus }> {
    const reply = await this.getCheck(true, o);
    if (reply.status !== 200 && reply.status !== 503) throw unexpectedStatus(reply, DAEMON_PATHS.check);
    return { serving: reply.status === 200, status: replyJson<DaemonStatus>(reply, 'the daemon status') };
  }

  private getCheck(json: boolean, o: CallOptions): Promise<HttpReply> {
    return this.wire.request({
      path: DAEMON_PATHS.check,
      headers: { accept: json ? 'application/json' : '*/*' },
      timeoutMs: o.timeoutMs,
      signal: o.signal,
    });
  }

  /** Ends kept connections (keep-alive). */
  close(): void {
    this.wire.close();
  }
}

/** A client of the daemon at `address` (limits: see WireLimits; one connection per call unless keepAlive). */
export function daemonClient(address: HostPort, limits: WireLimits = {}): DaemonClient {
  return new DaemonClient(address, limits);
}

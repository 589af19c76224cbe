import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  DAEMON_PATHS,
  type DaemonStatus,
  decodeLine,
  failure,
  hostAllowed,
  judgeOrigin,
  type Logger,
  parseMessage,
  RpcErrorCode,
  requestTooLarge,
  rpcError,
  SSE_KEEPALIVE_S,
  SSE_RECEIVE_EVENT,
} from '@vigil/shared-types';
import { type ConsumerHandle, consumerNameError, SSE_CONSUMER } from '../consumers.js';
import type { Inbox, InboxEvent } from '../inbox.js';
import { callContext, type Dispatcher, type Invoke, type Reply, settle } from '../rpc.js';

/** An SSE stream stops being fed while this many bytes wait for the client. */
const SSE_HIGH_WATER = 256 * 1024;
/** Events read from the inbox at a time: at most this many, and this many bytes (past the first). */
const PULL = 256;
const PULL_BYTES = 256 * 1024;
/** Written at most per write: a larger event goes in pieces of this many characters. */
const PIECE = 64 * 1024;
/** Written at most per stream per turn of the event loop. */
const TURN_BYTES = 256 * 1024;

export interface HttpOptions {
  readonly bindHost: string;
  /** Web origins (canonical) whose pages may call the RPC and events paths; empty: none. */
  readonly allowOrigins: ReadonlySet<string>;
  readonly maxRequestBytes: number;
  readonly maxStreams: number;
  readonly keepaliveMs?: number;
  readonly inbox: Inbox;
  /** The consumer names a stream may give (`?consumer=`). */
  readonly consumers: ReadonlySet<string>;
  readonly dispatcher: Dispatcher;
  readonly invoke: Invoke;
  /** 200 (true) or 503 (false) for /api/v1/check. */
  readonly serving: () => boolean;
  readonly status: () => DaemonStatus;
  readonly logger: Logger;
}

const JSON_TYPE = 'application/json';

/**
 * HTTP: JSON-RPC on POST /api/v1/rpc, Server-Sent Events on GET /api/v1/events, health on
 * GET /api/v1/check; 404 for every other path. Status codes as signal-cli's daemon: 200 for every
 * JSON-RPC reply (errors included), 201 with no body when no reply is due, 405, 415; and 413 for
 * a body over the limit, 421 for a Host that is neither the bind address nor a loopback name,
 * 403 for a web page of an origin the operator did not allow (--allow-origin) on the RPC and
 * events paths. Parsing is total (a bad path, query or header is a 4xx); a bug in one request is
 * logged and answered 500 (-32603 in a JSON-RPC exchange), and the daemon goes on.
 */
export class HttpTransport {
  readonly server: Server;
  readonly streams = new Set<SseStream>();

  constructor(private readonly o: HttpOptions) {
    this.server = createServer((req, res) => this.guarded(req, res, () => this.route(req, res)));
    this.server.keepAliveTimeout = 5000;
    this.server.on('clientError', (_err, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else socket.destroy();
    });
  }

  /** The last resort: what one request throws is logged and answered 500, and never ends the process. */
  private guarded(req: IncomingMessage, res: ServerResponse, run: () => void): void {
    try {
      run();
    } catch (err) {
      this.o.logger.error('request failed', { method: req.method, error: String(err) });
      internalError(res, req.url?.split('?')[0] === DAEMON_PATHS.rpc);
      req.resume();
    }
  }

  /**
   * Browsers cannot read the daemon: a request from a web page (it has `Origin`) of an origin not
   * allowed gets 403 and no CORS headers, its preflight too. An allowed origin gets the CORS
   * headers, and its preflight (OPTIONS) a 204. True when the request goes on.
   */
  private originAllowed(req: IncomingMessage, res: ServerResponse): boolean {
    const rule = judgeOrigin(req.headers.origin, this.o.allowOrigins);
    if (rule.kind === 'none') return true;
    if (rule.kind === 'refused') {
      plain(res, 403, 'Forbidden: requests from this web origin are not allowed (see --allow-origin)');
      req.resume();
      return false;
    }
    res.setHeader('access-control-allow-origin', rule.origin);
    res.setHeader('vary', 'Origin');
    if (req.method !== 'OPTIONS') return true;
    res.writeHead(204, {
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': req.headers['access-control-request-headers'] ?? 'content-type, last-event-id',
      'access-control-max-age': '600',
      'content-length': '0',
    });
    res.end();
    req.resume();
    return false;
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    if (!hostAllowed(req.headers.host, this.o.bindHost)) {
      plain(res, 421, 'Misdirected Request: this daemon answers only to its own address or a loopback name');
      req.resume();
      return;
    }
    const q = req.url?.indexOf('?') ?? -1;
    const path = q >= 0 ? req.url!.slice(0, q) : (req.url ?? '/');
    if ((path === DAEMON_PATHS.rpc || path === DAEMON_PATHS.events) && !this.originAllowed(req, res)) return;
    if (path === DAEMON_PATHS.rpc) {
      if (req.method === 'POST') this.rpc(req, res);
      else methodNotAllowed(req, res, 'POST');
    } else if (path === DAEMON_PATHS.events) {
      if (req.method === 'GET') this.events(req, res);
      else methodNotAllowed(req, res, 'GET');
    } else if (path === DAEMON_PATHS.check) {
      if (req.method === 'GET' || req.method === 'HEAD') this.check(req, res);
      else methodNotAllowed(req, res, 'GET, HEAD');
    } else {
      plain(res, 404, 'Not Found');
      req.resume();
    }
  }

  /** DNS-rebinding protection: a page in a browser cannot reach the daemon under a foreign name. */
  private rpc(req: IncomingMessage, res: ServerResponse): void {
    const type = req.headers['content-type'] ?? '';
    if (!type.toLowerCase().startsWith(JSON_TYPE)) {
      plain(res, 415, `Unsupported Media Type: send ${JSON_TYPE}`);
      req.resume();
      return;
    }
    const max = this.o.maxRequestBytes;
    const tooLarge = () => {
      const body = JSON.stringify(requestTooLarge('body', max));
      res.writeHead(413, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body), connection: 'close' });
      res.end(body);
      req.resume(); // discard the rest without keeping it
    };
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > max) {
      tooLarge();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > max) {
        over = true;
        chunks.length = 0;
        tooLarge();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () =>
      this.guarded(req, res, () => {
        if (over) return;
        const text = decodeLine(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
        const message =
          text === null
            ? ({
                kind: 'error',
                error: rpcError(RpcErrorCode.PARSE_ERROR, 'Parse error: the body is not valid UTF-8'),
              } as const)
            : parseMessage(text);
        // Guarded itself: a reply that comes later is written outside this turn's guard.
        const respond = (reply: Reply) =>
          this.guarded(req, res, () => {
            if (reply === undefined) {
              res.writeHead(201, { 'content-length': 0 });
              res.end();
              return;
            }
            const body = JSON.stringify(reply);
            res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
            res.end(body);
          });
        const failed = (err: unknown) => {
          this.o.logger.error('dispatch failed', { error: String(err) });
          internalError(res, true);
        };
        // A method that answers at once is answered here, in the same turn (see Dispatcher).
        settle(
          () => {
            const call = callContext(res);
            return this.o.dispatcher.dispatch(message, (method, params) => this.o.invoke(method, params, call));
          },
          (r) => respond(r as Reply),
          failed,
        );
      }),
    );
    req.on('error', () => {});
  }

  private check(req: IncomingMessage, res: ServerResponse): void {
    const code = this.o.serving() ? 200 : 503;
    if ((req.headers.accept ?? '').includes(JSON_TYPE)) {
      const body = JSON.stringify(this.o.status());
      res.writeHead(code, {
        'content-type': JSON_TYPE,
        'content-length': Buffer.byteLength(body),
        'cache-control': 'no-store',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    } else {
      res.writeHead(code, { 'content-length': 0, 'cache-control': 'no-store' });
      res.end();
    }
    req.resume();
  }

  private events(req: IncomingMessage, res: ServerResponse): void {
    if (this.streams.size >= this.o.maxStreams) {
      res.writeHead(503, { 'retry-after': '5', 'content-length': 0 });
      res.end();
      this.o.logger.warn('event stream refused: too many streams', { limit: this.o.maxStreams });
      return;
    }
    const header = req.headers['last-event-id'];
    const query = new URLSearchParams(req.url?.split('?')[1] ?? '');
    const name = query.get('consumer') ?? SSE_CONSUMER;
    const bad = consumerNameError(name, this.o.consumers);
    if (bad) {
      plain(res, 400, `Bad Request: ${bad}`);
      req.resume();
      return;
    }
    const cursor = this.o.inbox.cursorFrom(
      typeof header === 'string' ? header : (query.get('lastEventId') ?? undefined),
      name,
    );
    const consumer = this.o.inbox.consumer(name);
    const stream = new SseStream(res, this.o.inbox, cursor, consumer, this.o.keepaliveMs ?? SSE_KEEPALIVE_S * 1000);
    this.streams.add(stream);
    res.on('close', () => this.streams.delete(stream));
  }

  closeStreams(): void {
    for (const s of this.streams) s.close();
  }
}

/**
 * One SSE client: every stored event after its cursor, in order, each with its id; a comment
 * every keep-alive period. Streamed, never built into one string: events are read from the inbox
 * a bounded number of bytes at a time, only while the client keeps up (at most SSE_HIGH_WATER
 * bytes wait in the socket), and an event larger than a piece is written piece by piece as the
 * client reads; each turn writes at most TURN_BYTES, so many replays share the event loop with
 * everything else. A slow or stalled client costs a bounded buffer and misses nothing.
 */
export class SseStream {
  private readonly timer: NodeJS.Timeout;
  private readonly onAppended = () => this.pump();
  private closed = false;
  /** Read from the inbox, not yet written. */
  private queue: InboxEvent[] = [];
  /** The event being written in pieces: its text and how much of it is written. */
  private current: { seq: number; text: string; at: number } | null = null;
  private again: NodeJS.Immediate | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly inbox: Inbox,
    private cursor: number,
    private readonly consumer: ConsumerHandle,
    keepaliveMs: number,
  ) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    this.timer = setInterval(() => {
      // Not inside an event written in pieces: a comment there would corrupt it.
      if (res.writableLength < SSE_HIGH_WATER && this.current === null) res.write(':\n\n');
    }, keepaliveMs);
    this.timer.unref();
    inbox.on('appended', this.onAppended);
    res.on('drain', this.onAppended);
    res.on('close', () => this.dispose());
    this.pump();
  }

  /** The next event to write, or the rest of the one under way (null: none now). */
  private next(): { seq: number; text: string; at: number } | null {
    if (this.current) return this.current;
    if (this.queue.length === 0) {
      if (this.cursor >= this.inbox.head) return null;
      this.queue = this.inbox.after(this.cursor, PULL, PULL_BYTES);
      if (this.queue.length === 0) {
        this.cursor = this.inbox.head; // the rest was pruned by retention
        return null;
      }
    }
    const e = this.queue.shift()!;
    this.current = {
      seq: e.seq,
      text: `id:${this.inbox.eventId(e.seq)}\nevent:${SSE_RECEIVE_EVENT}\ndata:${e.json}\n\n`,
      at: 0,
    };
    return this.current;
  }

  private pump(): void {
    if (this.closed || this.again) return;
    let spent = 0;
    let out = '';
    const start = this.cursor;
    const flush = () => {
      if (out.length === 0) return;
      this.res.write(out);
      out = '';
    };
    while (!this.closed && spent < TURN_BYTES && this.res.writableLength + out.length < SSE_HIGH_WATER) {
      const e = this.next();
      if (!e) break;
      const piece = e.at === 0 && e.text.length <= PIECE ? e.text : e.text.slice(e.at, e.at + PIECE);
      out += piece;
      spent += piece.length;
      e.at += piece.length;
      if (out.length >= PIECE) flush();
      if (e.at >= e.text.length) {
        this.current = null;
        this.cursor = e.seq;
      }
    }
    flush();
    if (this.cursor > start) this.consumer.wrote(this.cursor);
    // More to write and the client keeps up: the rest in a later turn (others are served between).
    if (!this.closed && spent >= TURN_BYTES && this.res.writableLength < SSE_HIGH_WATER) {
      this.again = setImmediate(() => {
        this.again = null;
        this.pump();
      });
    }
  }

  close(): void {
    this.res.end();
  }

  private dispose(): void {
    this.closed = true;
    clearInterval(this.timer);
    if (this.again) clearImmediate(this.again);
    this.queue = [];
    this.current = null;
    this.inbox.off('appended', this.onAppended);
    this.consumer.close();
  }
}

function plain(res: ServerResponse, code: number, text: string): void {
  if (res.headersSent) return;
  const body = `${text}\n`;
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** 500: a JSON-RPC -32603 (id null) in a JSON-RPC exchange, else plain text; a reply under way is cut. */
function internalError(res: ServerResponse, rpc: boolean): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (!rpc) {
    plain(res, 500, 'Internal Server Error');
    return;
  }
  const body = JSON.stringify(failure(null, rpcError(RpcErrorCode.INTERNAL_ERROR, 'Internal error')));
  res.writeHead(500, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function methodNotAllowed(req: IncomingMessage, res: ServerResponse, allow: string): void {
  res.setHeader('allow', allow);
  plain(res, 405, 'Method Not Allowed');
  req.resume();
}

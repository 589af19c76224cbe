/**
 * vigil's one HTTP client, on Node's own `http`/`https` (no dependency, nothing to load before a
 * quick command runs): every request that vigil's programs, benchmarks and test helpers send to the
 * daemon, the inference server or an operator's URL goes through `Wire.request`. In one place:
 * - a time limit for the whole request (connect, send, the whole answer), and an AbortSignal;
 * - a limit on the answer's size: past it the request fails (`too_large`), or with
 *   `overflow: 'truncate'` what was read is kept and the connection dropped;
 * - connections: by default a fresh one per request, closed after it (a kept socket to a process
 *   since restarted would fail for the wrong reason); `keepAlive: true` pools them (benchmarks,
 *   many calls in a row) until `close()`;
 * - mutual TLS: the client certificate, key and CA are files read at each request, so that renewed
 *   certificates are picked up without a restart.
 * A failure to get an answer is a `WireError` whose `kind` says why (timeout, refused, reset, …);
 * an answer of any HTTP status is a reply, judged by the caller.
 */
import { readFileSync } from 'node:fs';
import { Agent, type IncomingHttpHeaders, type IncomingMessage, request as plainRequest } from 'node:http';
import { Agent as TlsAgent, request as tlsRequest } from 'node:https';
import { type CataloguedError, VIGIL_ERRORS, VigilError } from '../errors.js';
import { formatHostPort, type HostPort } from '../net.js';
import { terminalSafe } from '../terminal.js';

/** Why no (usable) answer came: the `kind` of a WireError. */
export type WireFailure =
  | 'timeout'
  | 'refused'
  | 'reset'
  | 'network'
  | 'too_large'
  | 'aborted'
  | 'tls_files'
  | 'http'
  | 'bad_reply';

/** The catalogue entries of the wire, by kind (`VIGIL_ERR_WIRE_…`, in VIGIL_ERRORS). */
export const WIRE_ERROR_CODES: Readonly<Record<WireFailure, CataloguedError>> = {
  timeout: VIGIL_ERRORS.VIGIL_ERR_WIRE_TIMEOUT,
  refused: VIGIL_ERRORS.VIGIL_ERR_WIRE_REFUSED,
  reset: VIGIL_ERRORS.VIGIL_ERR_WIRE_RESET,
  network: VIGIL_ERRORS.VIGIL_ERR_WIRE_NETWORK,
  too_large: VIGIL_ERRORS.VIGIL_ERR_WIRE_TOO_LARGE,
  aborted: VIGIL_ERRORS.VIGIL_ERR_WIRE_ABORTED,
  tls_files: VIGIL_ERRORS.VIGIL_ERR_WIRE_TLS_FILES,
  http: VIGIL_ERRORS.VIGIL_ERR_WIRE_HTTP_STATUS,
  bad_reply: VIGIL_ERRORS.VIGIL_ERR_WIRE_BAD_REPLY,
};

/** A request that got no answer, or an answer its client cannot use (`http`, `bad_reply`). */
export class WireError extends VigilError {
  readonly kind: WireFailure;
  /** The HTTP status, when an answer came. */
  readonly status: number | null;

  constructor(kind: WireFailure, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(WIRE_ERROR_CODES[kind], message, { cause: options.cause });
    this.kind = kind;
    this.status = options.status ?? null;
  }
}

/** Mutual TLS: file paths of the client certificate, its key and the server's CA (read at each request). */
export interface TlsFiles {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly servername?: string | undefined;
}

/** TLS material in memory (PEM), each part optional: a test's client with or without a certificate. */
export interface TlsPem {
  readonly ca?: string | Buffer | undefined;
  readonly cert?: string | Buffer | undefined;
  readonly key?: string | Buffer | undefined;
  readonly servername?: string | undefined;
}

/** Where requests go: an address, over plain HTTP, HTTPS, or HTTPS with a client certificate. */
export interface WireEndpoint {
  readonly address: HostPort;
  readonly https?: boolean | undefined;
  readonly tls?: TlsFiles | undefined;
  /** HTTPS with this material as it is (no files), instead of `tls`. */
  readonly tlsPem?: TlsPem | undefined;
}

export interface WireLimits {
  /** The most one request may take, from connecting to the answer's last byte (default 10 s). */
  readonly timeoutMs?: number;
  /** The most of an answer read, in bytes (default 8 MiB). */
  readonly maxBytes?: number;
  /** Past `maxBytes`: fail with `too_large` (default), or keep what was read (`truncate`). */
  readonly overflow?: 'fail' | 'truncate';
  /** Keep connections open between requests (default false: one connection per request). */
  readonly keepAlive?: boolean;
  /** Sent as User-Agent (default `vigil`). */
  readonly userAgent?: string;
}

export interface WireRequest {
  readonly method?: string;
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** A string or bytes as they are (give their content type); any other value is sent as JSON. */
  readonly body?: unknown;
  readonly signal?: AbortSignal | undefined;
  /** This request's own limits, over the client's. */
  readonly timeoutMs?: number | undefined;
  readonly maxBytes?: number | undefined;
}

/** Per call of a daemon or inference client: a shorter time limit, an AbortSignal. */
export interface CallOptions {
  readonly timeoutMs?: number | undefined;
  readonly signal?: AbortSignal | undefined;
}

export interface HttpReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The answer as UTF-8 text (at most `maxBytes` of it). */
  readonly text: string;
  /** True when the answer was longer than what was read (`overflow: 'truncate'`). */
  readonly truncated: boolean;
}

export const WIRE_DEFAULTS = { timeoutMs: 10_000, maxBytes: 8 << 20 } as const;

const SNIPPET_CHARS = 200;

/** At most 200 characters of an answer, on one line, control characters escaped: for a message. */
export function replySnippet(text: string): string {
  const one = terminalSafe(text.replace(/\s+/g, ' ').trim());
  return one.length > SNIPPET_CHARS ? `${one.slice(0, SNIPPET_CHARS - 1)}…` : one;
}

/** The reply's text as JSON; a `bad_reply` WireError when it is not JSON. */
export function replyJson<T = unknown>(reply: HttpReply, what = 'the answer'): T {
  try {
    return JSON.parse(reply.text) as T;
  } catch (err) {
    throw new WireError('bad_reply', `${what} is not JSON (HTTP ${reply.status}): ${replySnippet(reply.text)}`, {
      status: reply.status,
      cause: err,
    });
  }
}

/** A WireError of kind `http`: an answer with a status its client did not expect. */
export function unexpectedStatus(reply: HttpReply, what: string): WireError {
  const body = replySnippet(reply.text);
  return new WireError('http', `${what}: HTTP ${reply.status}${body ? `: ${body}` : ''}`, { status: reply.status });
}

/** The WireError for an error of Node's socket layer. */
function fromSocketError(err: NodeJS.ErrnoException, address?: HostPort): WireError {
  if (err instanceof WireError) return err;
  const code = err.code ?? '';
  if (code === 'ECONNREFUSED' && address) {
    return new WireError('refused', `nothing listens on ${formatHostPort(address)} (ECONNREFUSED)`, { cause: err });
  }
  const message = code && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  const kind: WireFailure =
    code === 'ECONNREFUSED'
      ? 'refused'
      : code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED'
        ? 'reset'
        : code === 'ETIMEDOUT'
          ? 'timeout'
          : 'network';
  return new WireError(kind, message, { cause: err });
}

/** A client of one endpoint: its requests share its limits and, with keep-alive, its connections. */
export class Wire {
  readonly endpoint: WireEndpoint;
  private readonly limits: WireLimits;
  private agent: Agent | null = null;

  constructor(endpoint: WireEndpoint, limits: WireLimits = {}) {
    this.endpoint = endpoint;
    this.limits = limits;
  }

  /** `http://HOST:PORT` or `https://…`, for messages. */
  get origin(): string {
    return `${this.secure ? 'https' : 'http'}://${formatHostPort(this.endpoint.address)}`;
  }

  private get secure(): boolean {
    return Boolean(this.endpoint.https || this.endpoint.tls || this.endpoint.tlsPem);
  }

  private agentFor(secure: boolean): Agent | false {
    if (!this.limits.keepAlive) return false;
    this.agent ??= secure ? new TlsAgent({ keepAlive: true }) : new Agent({ keepAlive: true });
    return this.agent;
  }

  /** Sends one request; resolves with the answer (any status), rejects with a WireError. */
  request(r: WireRequest): Promise<HttpReply> {
    const secure = this.secure;
    let tls: Record<string, unknown> = { ...this.endpoint.tlsPem };
    if (this.endpoint.tls) {
      try {
        tls = readTls(this.endpoint.tls);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const body = encodeBody(r.body);
    const headers: Record<string, string> = {
      'user-agent': this.limits.userAgent ?? 'vigil',
      ...(body ? { 'content-length': String(body.data.length) } : {}),
      ...(body?.type ? { 'content-type': body.type } : {}),
      ...r.headers,
    };
    const options = {
      host: this.endpoint.address.host.replace(/^\[|\]$/g, ''),
      port: this.endpoint.address.port,
      method: r.method ?? (body ? 'POST' : 'GET'),
      path: r.path,
      headers,
      agent: this.agentFor(secure),
      ...tls,
    };
    const timeoutMs = r.timeoutMs ?? this.limits.timeoutMs ?? WIRE_DEFAULTS.timeoutMs;
    const maxBytes = r.maxBytes ?? this.limits.maxBytes ?? WIRE_DEFAULTS.maxBytes;
    const truncate = this.limits.overflow === 'truncate';
    return new Promise<HttpReply>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        r.signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const fail = (err: WireError) => {
        settle(() => reject(err));
        req.destroy();
      };
      const onResponse = (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = (truncated: boolean) =>
          settle(() =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              text: Buffer.concat(chunks).toString('utf8'),
              truncated,
            }),
          );
        res.on('data', (c: Buffer) => {
          if (settled) return;
          if (size + c.length <= maxBytes) {
            chunks.push(c);
            size += c.length;
            return;
          }
          if (!truncate) return fail(new WireError('too_large', `the answer is over ${maxBytes} bytes`));
          chunks.push(c.subarray(0, maxBytes - size));
          size = maxBytes;
          done(true);
          req.destroy();
        });
        res.on('end', () => done(false));
        res.on('error', (err: NodeJS.ErrnoException) => fail(fromSocketError(err)));
        res.on('close', () => {
          if (!res.complete) fail(new WireError('reset', 'the answer ended early (connection closed)'));
        });
      };
      const req = (secure ? tlsRequest : plainRequest)(options, onResponse);
      req.on('error', (err: NodeJS.ErrnoException) => fail(fromSocketError(err, this.endpoint.address)));
      const timer = setTimeout(() => fail(new WireError('timeout', `no answer within ${timeoutMs} ms`)), timeoutMs);
      const onAbort = () => fail(new WireError('aborted', 'the request was aborted'));
      if (r.signal?.aborted) onAbort();
      else r.signal?.addEventListener('abort', onAbort, { once: true });
      req.end(body?.data);
    });
  }

  /** GET /metrics: the Prometheus text of a 200 answer, else a WireError. */
  async metrics(o: CallOptions & { headers?: Readonly<Record<string, string>> } = {}): Promise<string> {
    const reply = await this.request({ path: '/metrics', ...o });
    if (reply.status !== 200) throw unexpectedStatus(reply, `${formatHostPort(this.endpoint.address)}/metrics`);
    return reply.text;
  }

  /** Ends the kept connections (keep-alive); a fresh one is opened by the next request. */
  close(): void {
    this.agent?.destroy();
    this.agent = null;
  }
}

/** The bytes of a body; a value that is not a string or bytes is JSON, with its content type. */
function encodeBody(body: unknown): { data: Buffer; type?: string } | null {
  if (body === undefined) return null;
  if (typeof body === 'string') return { data: Buffer.from(body) };
  if (Buffer.isBuffer(body)) return { data: body };
  return { data: Buffer.from(JSON.stringify(body)), type: 'application/json' };
}

/** The TLS options of a mutual-TLS request, read from the files now. */
function readTls(t: TlsFiles): Record<string, unknown> {
  try {
    return {
      key: readFileSync(t.key),
      cert: readFileSync(t.cert),
      ca: readFileSync(t.ca),
      ...(t.servername ? { servername: t.servername } : {}),
    };
  } catch (err) {
    throw new WireError('tls_files', `cannot read the TLS files: ${(err as Error).message}`, { cause: err });
  }
}

/** The endpoint and path of an http(s) URL; null when it is not one. */
export function endpointOfUrl(text: string): { endpoint: WireEndpoint; path: string } | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  const https = url.protocol === 'https:';
  const port = url.port ? Number(url.port) : https ? 443 : 80;
  return { endpoint: { address: { host: url.hostname, port }, https }, path: `${url.pathname}${url.search}` };
}

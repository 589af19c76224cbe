/**
 * One HTTP request to a URL of an operator's configuration (a dead-man's-switch ping, a webhook
 * alert), bounded in time as a whole: a few attempts with a doubling backoff, all inside
 * `timeoutMs`. It never throws and never keeps a connection: the outcome says what happened, and
 * the caller logs it. At most a few KiB of an answer are read (for the message); the rest is
 * dropped.
 */
import { type PingWhat, pingUrl } from '../notify.js';
import { terminalSafe } from '../terminal.js';
import { endpointOfUrl, Wire, type WireError } from './wire-http.js';

export interface HttpRequestOptions {
  readonly method?: 'GET' | 'POST' | 'HEAD';
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** The most the whole request may take, retries included. */
  readonly timeoutMs: number;
  /** Tries in all (default 1); another only after a network error, a 429 or a 5xx. */
  readonly attempts?: number;
  /** The first wait between tries (doubling), default 250 ms. */
  readonly backoffMs?: number;
}

export interface HttpOutcome {
  readonly ok: boolean;
  /** The last HTTP status, null when none came back. */
  readonly status: number | null;
  readonly attempts: number;
  /** For a log line: `HTTP 200`, `HTTP 503: <body>`, `ECONNREFUSED …`, `timed out after 10000 ms`. */
  readonly detail: string;
}

const ANSWER_BYTES = 2048;

type Once = { status: number | null; body: string; error: string | null; retry: boolean };

async function once(wire: Wire, path: string, o: HttpRequestOptions, ms: number): Promise<Once> {
  try {
    const r = await wire.request({
      method: o.method ?? (o.body === undefined ? 'GET' : 'POST'),
      path,
      body: o.body,
      headers: o.headers ?? {},
      timeoutMs: ms,
    });
    return { status: r.status, body: r.text.trim(), error: null, retry: r.status === 429 || r.status >= 500 };
  } catch (err) {
    const e = err as WireError;
    if (e.kind === 'timeout')
      return { status: null, body: '', error: `timed out after ${Math.round(ms)} ms`, retry: false };
    const code = (e.cause as NodeJS.ErrnoException | undefined)?.code;
    return {
      status: null,
      body: '',
      error: code && !e.message.includes(code) ? `${code} ${e.message}` : e.message,
      retry: true,
    };
  }
}

/** Sends one request (see the module's comment); a URL that cannot be parsed is a failed outcome. */
export async function httpRequest(target: string, o: HttpRequestOptions): Promise<HttpOutcome> {
  const where = endpointOfUrl(target);
  if (!where) return { ok: false, status: null, attempts: 0, detail: `not an http(s) URL: ${target}` };
  const wire = new Wire(where.endpoint, { maxBytes: ANSWER_BYTES, overflow: 'truncate' });
  const deadline = performance.now() + o.timeoutMs;
  const attempts = Math.max(1, o.attempts ?? 1);
  let wait = o.backoffMs ?? 250;
  let last: Once = { status: null, body: '', error: 'not tried', retry: false };
  let tried = 0;
  while (tried < attempts) {
    const left = deadline - performance.now();
    if (left <= 0) break;
    tried += 1;
    last = await once(wire, where.path, o, left);
    if (!last.retry || tried >= attempts) break;
    if (deadline - performance.now() <= wait) break;
    await new Promise((r) => setTimeout(r, wait));
    wait *= 2;
  }
  const ok = last.status !== null && last.status >= 200 && last.status < 300;
  const detail =
    last.status !== null
      ? `HTTP ${last.status}${!ok && last.body ? `: ${terminalSafe(last.body.slice(0, 200))}` : ''}`
      : terminalSafe(last.error!);
  return { ok, status: last.status, attempts: tried, detail: `${tried > 1 ? `${tried} tries, last: ` : ''}${detail}` };
}

/**
 * A dead-man's-switch ping (healthchecks.io's convention): `start`, an exit code (0 is the bare
 * URL) or `fail`. A GET, retried on a network error or a 5xx, within `timeoutMs`.
 */
export function sendPing(base: string, what: PingWhat, timeoutMs: number): Promise<HttpOutcome> {
  let url: string;
  try {
    url = pingUrl(base, what);
  } catch {
    return Promise.resolve({ ok: false, status: null, attempts: 0, detail: `not an http(s) URL: ${base}` });
  }
  return httpRequest(url, { method: 'GET', timeoutMs, attempts: 3 });
}

/** POSTs `value` as JSON, with `headers` (retried on a network error, a 429 or a 5xx, within `timeoutMs`). */
export function postJson(
  url: string,
  value: unknown,
  headers: Readonly<Record<string, string>>,
  timeoutMs: number,
): Promise<HttpOutcome> {
  return httpRequest(url, {
    method: 'POST',
    body: JSON.stringify(value),
    headers: { 'content-type': 'application/json', ...headers },
    timeoutMs,
    attempts: 3,
  });
}

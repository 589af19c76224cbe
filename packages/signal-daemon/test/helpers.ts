/** Test helpers: real daemons (in-process or as processes), real HTTP, TCP and SSE clients. */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeLine, formatHostPort, type HostPort, LineFramer, parseHostPort } from '@vigil/shared-types';
import { Wire } from '@vigil/shared-types/node';
import { type DaemonHandle, type DaemonOptions, memoryLogger, start } from '../src/index.js';

export const BIN = fileURLToPath(new URL('../bin/signal-daemon.js', import.meta.url));

export function tmpDir(prefix = 'vigil-daemon-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A daemon in this process on free loopback ports, sharing `dir/localnet.sqlite`; held messages off unless asked for. */
export async function startDaemon(
  dir: string,
  account: string,
  extra: Partial<DaemonOptions> & { sseKeepaliveMs?: number } = {},
): Promise<DaemonHandle & { logs: Record<string, unknown>[] }> {
  const logs: Record<string, unknown>[] = [];
  const d = await start({
    account,
    http: { host: '127.0.0.1', port: 0 },
    tcp: { host: '127.0.0.1', port: 0 },
    localnet: join(dir, 'localnet.sqlite'),
    dataDir: join(dir, account),
    logger: memoryLogger(logs),
    // Most tests assume a new stream starts at the present; held messages are tested with hold on.
    hold: false,
    ...extra,
  });
  return Object.assign(d, { logs });
}

export interface HttpReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => unknown;
}

/** What a test may send and read: large bodies, and a loaded machine's pace. */
const TEST_LIMITS = { timeoutMs: 60_000, maxBytes: 256 << 20 } as const;

/** One HTTP request (vigil's one client) with full control of method, path, headers and raw body. */
export async function http(
  addr: HostPort,
  opts: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<HttpReply> {
  const r = await new Wire({ address: addr }, TEST_LIMITS).request({
    method: opts.method ?? 'POST',
    path: opts.path ?? '/api/v1/rpc',
    headers: opts.headers ?? { 'content-type': 'application/json' },
    body: opts.body,
  });
  return { status: r.status, headers: r.headers, text: r.text, json: () => JSON.parse(r.text) };
}

/** JSON-RPC over HTTP: the parsed reply body. */
export async function rpc(addr: HostPort, method: string, params?: unknown, id: number | string = 1): Promise<any> {
  const r = await http(addr, { body: JSON.stringify({ jsonrpc: '2.0', method, params, id }) });
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.text}`);
  return r.json();
}

/** A newline-delimited JSON client over TCP. */
export class TcpClient {
  readonly socket: Socket;
  private readonly framer = new LineFramer();
  private readonly queue: unknown[] = [];
  private waiters: ((v: unknown) => void)[] = [];
  closed = false;

  private constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      for (const f of this.framer.push(chunk)) {
        if (f.kind !== 'line') continue;
        const v = JSON.parse(decodeLine(f.bytes) ?? 'null');
        const w = this.waiters.shift();
        if (w) w(v);
        else this.queue.push(v);
      }
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => {});
  }

  /** Connects, from `localAddress` when given (e.g. 127.0.0.2, the relay's default source). */
  static connect(addr: HostPort, localAddress?: string): Promise<TcpClient> {
    return new Promise((resolve, reject) => {
      const s = connect({ host: addr.host, port: addr.port, localAddress }, () => resolve(new TcpClient(s)));
      s.once('error', reject);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** The next line the daemon wrote, parsed. */
  next(timeoutMs = 5000): Promise<any> {
    const queued = this.queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`no line from the daemon within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (v: unknown) => {
        clearTimeout(t);
        resolve(v);
      };
      this.waiters.push(done);
    });
  }

  async call(method: string, params?: unknown, id: number | string = 1): Promise<any> {
    this.write(`${JSON.stringify({ jsonrpc: '2.0', method, params, id })}\n`);
    return this.next();
  }

  /** Lines already received and not yet read. */
  get pending(): number {
    return this.queue.length;
  }

  close(): void {
    this.socket.destroy();
  }
}

export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

/** A Server-Sent Events client that keeps every event and comment it receives. */
export class SseClient {
  readonly events: SseEvent[] = [];
  comments = 0;
  status = 0;
  headers: Record<string, string | string[] | undefined> = {};
  private buffer = '';
  private waiters: (() => void)[] = [];
  private req: ReturnType<typeof request> | null = null;
  ended = false;

  /** Opens a stream, with a Last-Event-ID header and a query (e.g. `consumer=agent`) when given. */
  static open(addr: HostPort, lastEventId?: string, query?: string): Promise<SseClient> {
    const c = new SseClient();
    return new Promise((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const path = `/api/v1/events${query === undefined ? '' : `?${query}`}`;
      c.req = request({ host: addr.host, port: addr.port, path, headers, agent: false }, (res) => {
        c.status = res.statusCode ?? 0;
        c.headers = res.headers;
        res.setEncoding('utf8');
        res.on('data', (s: string) => c.feed(s));
        res.on('end', () => {
          c.ended = true;
          c.wake();
        });
        res.on('error', () => {});
        resolve(c);
      });
      c.req.on('error', reject);
      c.req.end();
    });
  }

  private feed(s: string): void {
    this.buffer += s;
    for (;;) {
      const end = this.buffer.indexOf('\n\n');
      if (end < 0) break;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const ev: SseEvent = { data: '' };
      let isComment = true;
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        isComment = false;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') ev.id = value;
        else if (field === 'event') ev.event = value;
        else if (field === 'data') data.push(value);
      }
      if (isComment) this.comments++;
      else {
        ev.data = data.join('\n');
        this.events.push(ev);
      }
    }
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until at least `n` events have arrived. */
  async waitFor(n: number, timeoutMs = 10_000): Promise<SseEvent[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length < n) {
      if (this.ended) throw new Error(`stream ended after ${this.events.length} of ${n} events`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${this.events.length} of ${n} events within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.events;
  }

  close(): void {
    this.req?.destroy();
  }
}

/**
 * A daemon as a real process (under `umask` when given, e.g. '022'); resolves once it logged its
 * bound addresses.
 */
export function spawnDaemon(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  umask?: string,
): Promise<{ child: ChildProcess; http: HostPort | null; tcp: HostPort | null; output: () => string }> {
  return new Promise((resolve, reject) => {
    const [cmd, argv] = umask
      ? ['/bin/sh', ['-c', `umask ${umask}; exec "$@"`, 'sh', process.execPath, BIN, ...args]]
      : [process.execPath, [BIN, ...args]];
    const child = spawn(cmd, argv, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    // With --log-file the log (and its "listening" record) goes to the file.
    const logFile = args.includes('--log-file') ? args[args.indexOf('--log-file') + 1] : undefined;
    let fromFile = '';
    const t = setTimeout(() => {
      clearInterval(poll);
      child.kill('SIGKILL');
      reject(new Error(`daemon did not start:\n${out}${fromFile}`));
    }, 15_000);
    const poll = setInterval(() => {
      if (!logFile) return;
      try {
        fromFile = readFileSync(logFile, 'utf8');
      } catch {
        return;
      }
      check(fromFile);
    }, 50);
    const check = (text: string) => {
      const line = text.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (!line) return;
      clearTimeout(t);
      clearInterval(poll);
      const rec = JSON.parse(line) as { http: string; tcp: string };
      const addr = (a: string) => (a === 'off' ? null : parseHostPort(a));
      resolve({ child, http: addr(rec.http), tcp: addr(rec.tcp), output: () => out });
    };
    child.stdout!.setEncoding('utf8');
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (s: string) => {
      out += s;
    });
    child.stdout!.on('data', (s: string) => {
      out += s;
      check(out);
    });
    child.on('exit', (code) => {
      clearTimeout(t);
      clearInterval(poll);
      reject(new Error(`daemon exited with ${code} before listening:\n${out}`));
    });
  });
}

export { exited } from '../../../test/support.js';

export const url = (addr: HostPort) => `http://${formatHostPort(addr)}`;

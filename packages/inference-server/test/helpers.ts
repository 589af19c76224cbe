/** Test helpers: the built binary as a real process, generated models in temp dirs, HTTP(S) clients. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { formatHostPort, type HostPort, parseHostPort } from '@vigil/shared-types';
import { Wire } from '@vigil/shared-types/node';
import OpenAI from 'openai';

export const BIN = fileURLToPath(new URL('../bin/inference-server.js', import.meta.url));
const run = promisify(execFile);

export function tmpDir(prefix = 'vigil-inference-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

/** Runs the CLI to completion. */
export async function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeout = 30_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      timeout,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** Writes the tiny model with the CLI (the generator runs in a child process too). */
export async function makeTiny(file: string, extra: string[] = []): Promise<void> {
  const r = await cli(['make-model', '--out', file, ...extra]);
  if (r.code !== 0) throw new Error(`make-model failed: ${r.stderr}`);
}

export interface ServerProcess {
  child: ChildProcess;
  http: HostPort | null;
  mtls: HostPort | null;
  output: () => string;
  /** Resolves when a log line containing `text` has been written. */
  waitForLog: (text: string, timeoutMs?: number) => Promise<string>;
}

/** The server as a real process; resolves once it logged its bound addresses. */
export function spawnServer(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'serve', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const watchers: (() => void)[] = [];
    const t = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 20_000);
    child.stdout!.setEncoding('utf8');
    child.stderr!.setEncoding('utf8');
    const feed = (s: string) => {
      out += s;
      for (const w of watchers.splice(0)) w();
    };
    child.stderr!.on('data', feed);
    child.stdout!.on('data', (s: string) => {
      feed(s);
      const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line) {
        clearTimeout(t);
        const rec = JSON.parse(line) as { http: string; mtls: string };
        const addr = (a: string) => (a === 'off' ? null : parseHostPort(a));
        resolve({
          child,
          http: addr(rec.http),
          mtls: addr(rec.mtls),
          output: () => out,
          waitForLog: (text, timeoutMs = 20_000) =>
            new Promise((res, rej) => {
              const deadline = setTimeout(() => rej(new Error(`no "${text}" in the log:\n${out}`)), timeoutMs);
              const check = () => {
                const l = out.split('\n').find((x) => x.includes(text));
                if (l !== undefined) {
                  clearTimeout(deadline);
                  res(l);
                } else watchers.push(check);
              };
              check();
            }),
        });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`server exited with ${code} before listening:\n${out}`));
    });
  });
}

export { exited } from '../../../test/support.js';

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => any;
}

export interface RequestOptions {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | object;
  /** https with these TLS options (mTLS) */
  tls?: { ca?: Buffer | string; cert?: Buffer | string; key?: Buffer | string; servername?: string };
}

/** One HTTP(S) request (vigil's one client); the body (an object is sent as JSON) and the whole reply. */
export async function request(addr: HostPort, opts: RequestOptions = {}): Promise<Reply> {
  const r = await new Wire(
    { address: addr, ...(opts.tls ? { tlsPem: opts.tls } : {}) },
    { timeoutMs: 120_000, maxBytes: 256 << 20 },
  ).request({
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    path: opts.path ?? '/v1/chat/completions',
    headers: opts.headers ?? (opts.body === undefined ? {} : { 'content-type': 'application/json' }),
    body: opts.body,
  });
  return { status: r.status, headers: r.headers, text: r.text, json: () => JSON.parse(r.text) };
}

/** Polls /health until it answers 200. */
export async function waitHealthy(addr: HostPort, timeoutMs = 20_000, tls?: RequestOptions['tls']): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await request(addr, { path: '/health', ...(tls ? { tls } : {}) }).catch(() => null);
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`not healthy within ${timeoutMs} ms: ${r?.status} ${r?.text}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** A streaming completion read as raw SSE: every `data:` payload, as it comes. */
export class SseCompletion {
  readonly events: string[] = [];
  status = 0;
  ended = false;
  private buffer = '';
  private waiters: (() => void)[] = [];
  private req: ReturnType<typeof httpRequest> | null = null;

  static open(addr: HostPort, body: object): Promise<SseCompletion> {
    const c = new SseCompletion();
    return new Promise((resolve, reject) => {
      c.req = httpRequest(
        {
          host: addr.host,
          port: addr.port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json' },
          agent: false,
        },
        (res) => {
          c.status = res.statusCode ?? 0;
          res.setEncoding('utf8');
          res.on('data', (s: string) => c.feed(s));
          res.on('end', () => c.end());
          res.on('close', () => c.end());
          res.on('error', () => {});
          resolve(c);
        },
      );
      c.req.on('error', (err) => {
        c.end();
        reject(err);
      });
      c.req.end(JSON.stringify({ ...body, stream: true }));
    });
  }

  private end(): void {
    this.ended = true;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  private feed(s: string): void {
    this.buffer += s;
    for (;;) {
      const i = this.buffer.indexOf('\n\n');
      if (i < 0) break;
      const block = this.buffer.slice(0, i);
      this.buffer = this.buffer.slice(i + 2);
      for (const line of block.split('\n')) if (line.startsWith('data: ')) this.events.push(line.slice(6));
    }
    this.wake();
  }

  /** Waits until `n` events arrived (or the stream ended). */
  async waitFor(n: number, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.events.length < n && !this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`only ${this.events.length} of ${n} events`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  async waitEnd(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('the stream did not end');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.req?.destroy();
  }
}

export function occupy(): Promise<Server> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

export const url = (addr: HostPort) => `http://${formatHostPort(addr)}`;

/** A completion request for the model `tiny`: one user message, and these other fields. */
export function chat<F extends object = Record<never, never>>(
  content: string,
  fields?: F,
): { model: string; messages: { role: 'user'; content: string }[] } & F {
  return { model: 'tiny', messages: [{ role: 'user', content }], ...(fields as F) };
}

/** A completion long enough to be still running when the test acts (tiny model, big context). */
export const LONG = chat('hello', { max_tokens: 30000 });

/** The flags that give a sequence room for LONG. */
export const BIG_CONTEXT = ['--context-size', '32768'];

/** The tiny model, generated in a temporary directory before the file's tests and removed after them. */
export function tinyModel(): { dir: string; model: string } {
  const tmp = tmpDir();
  const model = join(tmp.dir, 'tiny.gguf');
  beforeAll(() => makeTiny(model));
  afterAll(() => tmp.cleanup());
  return { dir: tmp.dir, model };
}

/** The server on `model` as the id `tiny`, plain HTTP on a free loopback port, with these other flags. */
export function serveTiny(model: string, flags: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  return spawnServer(['--model', model, '--model-id', 'tiny', '--http', '127.0.0.1:0', ...flags], env);
}

/** The official client on the plain listener, without retries. */
export const openaiClient = (addr: HostPort, apiKey = 'unused') =>
  new OpenAI({ baseURL: `${url(addr)}/v1`, apiKey, maxRetries: 0 });

/** Runs `use` on a started server once it is healthy; the process is killed afterwards whatever happens. */
export async function withServer<T>(
  started: Promise<ServerProcess>,
  use: (s: ServerProcess) => Promise<T>,
): Promise<T> {
  const s = await started;
  try {
    await waitHealthy(s.http!);
    return await use(s);
  } finally {
    s.child.kill('SIGKILL');
  }
}

/** A server shared by the tests of a block: its process, plain listener and client. */
export interface SharedServer {
  readonly process: ServerProcess;
  readonly http: HostPort;
  readonly openai: OpenAI;
}

/** Starts a server before the block's tests and waits until it is healthy; kills it after them. */
export function sharedServer(start: () => Promise<ServerProcess>, apiKey?: string): SharedServer {
  let s: ServerProcess | undefined;
  let client: OpenAI | undefined;
  beforeAll(async () => {
    s = await start();
    await waitHealthy(s.http!);
    client = openaiClient(s.http!, apiKey);
  });
  afterAll(() => {
    s?.child.kill('SIGKILL');
  });
  const started = () => {
    if (!s?.http || !client) throw new Error('the server has not started');
    return { s, http: s.http, client };
  };
  return {
    get process() {
      return started().s;
    },
    get http() {
      return started().http;
    },
    get openai() {
      return started().client;
    },
  };
}

/** Waits until `n` sequences are generating, as /metrics counts them. */
export async function waitBusy(addr: HostPort, n: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await request(addr, { path: '/metrics' });
    const busy = Number(/^inference_busy_sequences (\d+)$/m.exec(r.text)?.[1] ?? 0);
    if (busy >= n) return;
    if (Date.now() > deadline) throw new Error(`${busy} of ${n} sequences busy after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** The body of an OpenAI error that names no parameter. */
export const errorBody = (type: string, code: string, message: unknown = expect.any(String)) => ({
  error: { message, type, param: null, code },
});

/** Waits for a stream's end and checks that it ends with `[DONE]`; the event before it, parsed. */
export async function lastEventBeforeDone(sse: SseCompletion): Promise<any> {
  await sse.waitEnd();
  expect(sse.events[sse.events.length - 1]).toBe('[DONE]');
  return JSON.parse(sse.events[sse.events.length - 2]!);
}

export function readLines(file: string): Record<string, any>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** A small JSON-schema check for what the tests' schemas use (the server's answers are checked against it). */
export function validate(schema: any, v: any, path = '$'): string[] {
  if (schema.enum) return schema.enum.includes(v) ? [] : [`${path}: not one of ${schema.enum}`];
  switch (schema.type) {
    case 'object': {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return [`${path}: not an object`];
      const errs: string[] = [];
      for (const r of schema.required ?? []) if (!(r in v)) errs.push(`${path}.${r}: missing`);
      for (const [k, x] of Object.entries(v)) {
        const p = schema.properties?.[k];
        if (p) errs.push(...validate(p, x, `${path}.${k}`));
        else if (schema.additionalProperties === false) errs.push(`${path}.${k}: not allowed`);
      }
      return errs;
    }
    case 'array':
      if (!Array.isArray(v)) return [`${path}: not an array`];
      if (schema.maxItems !== undefined && v.length > schema.maxItems) return [`${path}: too many items`];
      return v.flatMap((x, i) => validate(schema.items, x, `${path}[${i}]`));
    case 'string':
      if (typeof v !== 'string') return [`${path}: not a string`];
      return schema.maxLength !== undefined && v.length > schema.maxLength ? [`${path}: too long`] : [];
    case 'integer':
      return Number.isInteger(v) ? [] : [`${path}: not an integer (${v})`];
    case 'boolean':
      return typeof v === 'boolean' ? [] : [`${path}: not a boolean`];
    default:
      return [`${path}: unknown schema`];
  }
}

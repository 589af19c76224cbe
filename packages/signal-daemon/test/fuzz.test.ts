/**
 * Property-based fuzzing of the daemon's JSON-RPC transports (fast-check).
 *
 * TCP: arbitrary lines (random bytes, random JSON, calls, notifications, batches, deep nesting,
 * invalid UTF-8, blank and oversize lines), each terminated by `\n` or `\r\n`, written as a byte
 * stream cut at arbitrary points. A small reference model says which reply each line is due;
 * the daemon must send exactly those (in any order), each a well-formed JSON-RPC 2.0 response,
 * and survive. HTTP: the same kind of bodies get 200 with the reply due, or 201 with an empty
 * body when none is due. And an oversize line does not cost the line after it its reply.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import type { DaemonHandle } from '../src/index.js';
import { http, rpc, startDaemon, TcpClient, tmpDir } from './helpers.js';

type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

const ACCOUNT = '+15550000701';
/** The line limit of the TCP fuzz daemon: small enough to reach, large enough for deep nesting. */
const TCP_LIMIT = 64 * 1024;
/** The limit of the daemon for the oversize property. */
const SMALL_LIMIT = 4096;

const PARSE_ERROR = -32700;
const INVALID_REQUEST = -32600;
const METHOD_NOT_FOUND = -32601;

// ---------------------------------------------------------------------------------------------
// Unique ids: the arbitraries put a marker where a fresh id goes; rendering replaces it.

const UID_STRING = '$fz:uid-string';
const UID_NUMBER = '$fz:uid-number';
let idSeq = 0;

class Ids {
  readonly issued = new Set<string | number>();
  fresh(kind: string): string | number {
    idSeq++;
    const id = kind === UID_NUMBER ? 1_000_000_000 + idSeq : `fz-${idSeq}`;
    this.issued.add(id);
    return id;
  }
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Replaces the id markers of a request (or of the top-level elements of a batch). */
function withIds(value: unknown, ids: Ids): unknown {
  const one = (v: unknown): unknown =>
    isPlainObject(v) && (v.id === UID_STRING || v.id === UID_NUMBER) ? { ...v, id: ids.fresh(v.id) } : v;
  return Array.isArray(value) ? value.map(one) : one(value);
}

// ---------------------------------------------------------------------------------------------
// The reference model.

/** What one reply element must be: a result, an error code, or anything well-formed ('*'). */
type Code = number | 'result' | '*';
interface Outcome {
  readonly code: Code;
  /** A fresh id of ours: a call's reply must carry it; an invalid request's reply may. */
  readonly id?: string | number;
  readonly call?: boolean;
  /** 'empty': must say "Empty input line"; 'blank': may; 'oversize': must say "Request too large". */
  readonly tag?: 'empty' | 'blank' | 'oversize';
}
type Due =
  | { readonly kind: 'none' }
  | { readonly kind: 'one'; readonly outcome: Outcome }
  | { readonly kind: 'batch'; readonly outcomes: readonly Outcome[] };

const NONE: Due = { kind: 'none' };
const one = (outcome: Outcome): Due => ({ kind: 'one', outcome });

/** Methods that exist besides `version`; their result depends on state and params. */
const KNOWN_METHODS = new Set([
  'subscribeReceive',
  'unsubscribeReceive',
  'send',
  'sendReceipt',
  'getUserStatus',
  'listContacts',
  'block',
  'unblock',
  'updateGroup',
  'listGroups',
  'sendSyncRequest',
  'startLink',
  'finishLink',
  'addDevice',
  'listDevices',
  'listAccounts',
]);

function isId(v: unknown): boolean {
  return v === null || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));
}

/** One request: null for a notification (no reply), else the reply due. */
function outcomeOf(v: unknown, ids: Ids): Outcome | null {
  if (!isPlainObject(v)) return { code: INVALID_REQUEST };
  const hasId = Object.hasOwn(v, 'id');
  const tracked = hasId && ids.issued.has(v.id as string | number) ? (v.id as string | number) : undefined;
  const params = v.params;
  const valid =
    (!hasId || isId(v.id)) &&
    v.jsonrpc === '2.0' &&
    typeof v.method === 'string' &&
    v.method !== '' &&
    (params === undefined || typeof params === 'object'); // null, an object or an array
  if (!valid) return { code: INVALID_REQUEST, id: tracked, call: false };
  if (!hasId) return null;
  const method = v.method as string;
  const code: Code = method === 'version' ? 'result' : KNOWN_METHODS.has(method) ? '*' : METHOD_NOT_FOUND;
  return { code, id: tracked, call: true };
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The reply due for one message (a TCP line's content, an HTTP body). */
function dueForMessage(bytes: Uint8Array, ids: Ids): Due {
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    return one({ code: PARSE_ERROR });
  }
  if (/^[ \t\r\n]*$/.test(text)) return one({ code: PARSE_ERROR, tag: 'empty' });
  if (text.trim() === '') return one({ code: PARSE_ERROR, tag: 'blank' });
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return one({ code: PARSE_ERROR });
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return one({ code: INVALID_REQUEST });
    const outcomes = value.map((v) => outcomeOf(v, ids)).filter((o): o is Outcome => o !== null);
    return outcomes.length === 0 ? NONE : { kind: 'batch', outcomes };
  }
  const o = outcomeOf(value, ids);
  return o === null ? NONE : one(o);
}

/**
 * The replies due for what was written as one TCP line: framing as Java's readLine (a CR inside
 * ends a line too; a trailing CR before the `\n` makes one `\r\n`), the limit, then each message.
 */
function duesForLine(content: Uint8Array, crlf: boolean, limit: number, ids: Ids): Due[] {
  const pieces: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i < content.length; i++) {
    if (content[i] === 0x0d) {
      pieces.push(content.subarray(start, i));
      start = i + 1;
    }
  }
  const last = content.subarray(start);
  // Joined with a bare `\n`, a trailing CR of the content and that `\n` are one line end.
  if (!(last.length === 0 && pieces.length > 0 && !crlf)) pieces.push(last);
  return pieces.map((c) =>
    c.length > limit ? one({ code: INVALID_REQUEST, tag: 'oversize' }) : dueForMessage(c, ids),
  );
}

// ---------------------------------------------------------------------------------------------
// Checking replies against what is due.

function isResponse(v: unknown): boolean {
  if (!isPlainObject(v) || v.jsonrpc !== '2.0' || !Object.hasOwn(v, 'id') || !isId(v.id)) return false;
  const keys = Object.keys(v);
  if (keys.some((k) => !['jsonrpc', 'id', 'result', 'error'].includes(k))) return false;
  const hasResult = Object.hasOwn(v, 'result');
  const hasError = Object.hasOwn(v, 'error');
  if (hasResult === hasError) return false;
  if (hasResult) return true;
  const e = v.error;
  return (
    isPlainObject(e) &&
    Number.isInteger(e.code) &&
    typeof e.message === 'string' &&
    Object.hasOwn(e, 'data') &&
    Object.keys(e).every((k) => ['code', 'message', 'data'].includes(k))
  );
}

type Response = { id: unknown; result?: unknown; error?: { code: number; message: string; data: unknown } };

const codeOf = (r: Response): number | 'result' => (r.error ? r.error.code : 'result');

function fail(message: string, replies: unknown[], dues: Due[]): never {
  const show = (v: unknown) => {
    const s = JSON.stringify(v);
    return s.length > 4000 ? `${s.slice(0, 4000)}…` : s;
  };
  throw new Error(`${message}\n  replies: ${show(replies)}\n  due: ${show(dues)}`);
}

/** Checks a set of replies (any order) against the replies due for a set of messages. */
function checkReplies(replies: unknown[], dues: Due[]): void {
  for (const r of replies) {
    const ok = Array.isArray(r) ? r.length > 0 && r.every(isResponse) : isResponse(r);
    if (!ok) fail(`malformed reply ${JSON.stringify(r)}`, replies, dues);
  }
  const due = dues.filter((d) => d.kind !== 'none');
  if (replies.length !== due.length) fail(`${replies.length} replies, ${due.length} due`, replies, dues);

  // Batches: as many array replies as batches due, of the same sizes.
  const lengths = (xs: number[]) => xs.sort((a, b) => a - b).join(',');
  const gotBatches = lengths(replies.filter(Array.isArray).map((r) => r.length));
  const dueBatches = lengths(due.flatMap((d) => (d.kind === 'batch' ? [d.outcomes.length] : [])));
  if (gotBatches !== dueBatches) fail(`batch replies of sizes [${gotBatches}], due [${dueBatches}]`, replies, dues);

  const responses = replies.flat() as Response[];
  const outcomes = due.flatMap((d) => (d.kind === 'batch' ? d.outcomes : d.kind === 'one' ? [d.outcome] : []));

  // Our fresh ids: a call's reply carries its id exactly once, with the outcome due.
  for (const o of outcomes) {
    if (o.id === undefined) continue;
    const withId = responses.filter((r) => r.id === o.id);
    if (o.call) {
      if (withId.length !== 1) fail(`${withId.length} replies with id ${JSON.stringify(o.id)}`, replies, dues);
      const r = withId[0]!;
      if (o.code !== '*' && codeOf(r) !== o.code) fail(`id ${o.id}: ${codeOf(r)}, due ${o.code}`, replies, dues);
      if (o.code === 'result' && typeof (r.result as { version?: unknown })?.version !== 'string') {
        fail(`id ${o.id}: version result ${JSON.stringify(r.result)}`, replies, dues);
      }
    } else if (withId.length > 1 || (withId.length === 1 && codeOf(withId[0]!) !== INVALID_REQUEST)) {
      fail(`invalid request with id ${o.id}: ${JSON.stringify(withId)}`, replies, dues);
    }
  }

  // Codes, as multisets: every definite code at least as often as due, the rest for the wildcards.
  const count = <T>(xs: T[]) => {
    const m = new Map<T, number>();
    for (const x of xs) m.set(x, (m.get(x) ?? 0) + 1);
    return m;
  };
  const got = count(responses.map(codeOf));
  const want = count(outcomes.map((o) => o.code));
  // (The totals are equal, so what is left over is exactly one reply per wildcard.)
  if (responses.length !== outcomes.length)
    fail(`${responses.length} responses, due ${outcomes.length}`, replies, dues);
  for (const [code, n] of want) {
    if (code !== '*' && (got.get(code) ?? 0) < n) {
      fail(`codes ${JSON.stringify([...got])}, due ${JSON.stringify([...want])}`, replies, dues);
    }
  }

  // Messages: blank lines and oversize lines say what they are.
  const messages = responses.map((r) => r.error?.message ?? '');
  const empties = messages.filter((m) => m === 'Empty input line').length;
  const mustEmpty = outcomes.filter((o) => o.tag === 'empty').length;
  const mayEmpty = outcomes.filter((o) => o.tag === 'blank').length;
  if (empties < mustEmpty || empties > mustEmpty + mayEmpty) {
    fail(`${empties} "Empty input line" replies, due ${mustEmpty} (+${mayEmpty})`, replies, dues);
  }
  const tooLarge = responses.filter(
    (r) => r.error?.code === INVALID_REQUEST && /^Request too large/.test(r.error.message),
  );
  const dueTooLarge = outcomes.filter((o) => o.tag === 'oversize').length;
  if (tooLarge.length !== dueTooLarge)
    fail(`${tooLarge.length} "Request too large", due ${dueTooLarge}`, replies, dues);
  if (tooLarge.some((r) => r.id !== null)) fail('a "Request too large" reply with an id', replies, dues);
}

// ---------------------------------------------------------------------------------------------
// Arbitraries.

const goodParams = fc.oneof(
  fc.constantFrom<unknown>(null, {}, []),
  fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
);
const anyParams = fc.oneof(
  goodParams,
  fc.constantFrom<unknown>(5, 0, 'x', '', true, false),
  fc.jsonValue({ maxDepth: 2 }),
);
const goodMethod = fc.oneof(
  { weight: 5, arbitrary: fc.constant('version') },
  { weight: 3, arbitrary: fc.constant('fz.noSuchMethod') },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }).map((s) => `fz.${s}`) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('listContacts', 'listGroups', 'listDevices', 'listAccounts', 'getUserStatus', 'Version'),
  },
);
const anyMethod = fc.oneof(goodMethod, fc.constantFrom<unknown>('', ' ', 5, null, true, ['version'], { m: 1 }));
const freshId = fc.constantFrom(UID_STRING, UID_NUMBER);
const anyId = fc.oneof(
  { weight: 4, arbitrary: freshId },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 0, -1, 1.5, 'dup', '') },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(true, false, {}, [], [1], { id: 1 }) },
);
const anyJsonrpc = fc.oneof(
  { weight: 6, arbitrary: fc.constant('2.0') },
  { weight: 1, arbitrary: fc.constantFrom<unknown>('1.0', '2', 2, 2.0, null, '2.0 ', ['2.0']) },
);

const call = fc.record(
  { jsonrpc: fc.constant('2.0'), method: goodMethod, params: goodParams, id: freshId },
  { requiredKeys: ['jsonrpc', 'method', 'id'] },
);
const notification = fc.record(
  { jsonrpc: fc.constant('2.0'), method: goodMethod, params: goodParams },
  { requiredKeys: ['jsonrpc', 'method'] },
);
/** Anything shaped like a request, often not quite one. */
const requestLike = fc.record(
  { jsonrpc: anyJsonrpc, method: anyMethod, params: anyParams, id: anyId },
  { requiredKeys: [] },
);
const request = fc.oneof(call, notification, requestLike);
const batch = fc.oneof(
  fc.array(fc.oneof(call, notification, requestLike, fc.jsonValue({ maxDepth: 2 })), { maxLength: 6 }),
  fc.array(notification, { minLength: 1, maxLength: 4 }),
);

/** Byte sequences that are not UTF-8: bad bytes, overlong forms, surrogates, out of range, truncated. */
const badUtf8 = fc.constantFrom(
  [0xff],
  [0xfe],
  [0x80],
  [0xbf],
  [0xc0, 0xaf],
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0xc3],
);

/** Raw lines at the edges of the grammar. */
const edgeText = fc.constantFrom(
  '',
  ' ',
  '\t',
  '\r',
  ' \t \r ',
  '\u00a0',
  '\u2028',
  '\f',
  'null',
  'true',
  '0',
  '"version"',
  '[]',
  '[[]]',
  '[{}]',
  '[null]',
  '{}',
  '{"jsonrpc":"2.0","method":"version","id":1e400}',
  '{"jsonrpc":"2.0","method":"version","id":-0}',
  '{"jsonrpc":"2.0","method":"version","id":1,"id":{}}',
  '{"jsonrpc":"2.0","method":"version","id":{},"id":7}',
  '{"jsonrpc":"2.0","method":"version"} {"jsonrpc":"2.0","method":"version"}',
  '{"jsonrpc":"2.0","method":"version"}x',
  '{"jsonrpc":"2.0","method":"version"',
  '{"jsonrpc":"2.0","method":"version","params":"x"}',
  '{"jsonrpc":"2.0","method":"\\u0000"}',
  '{"jsonrpc":"2.0","method":"\\ud800","id":"lone"}',
  '{"__proto__":{"jsonrpc":"2.0","method":"version"}}',
  '{"jsonrpc":"2.0","method":"version","__proto__":null}',
  '{"jsonrpc":"2.0","method":"constructor","id":"c"}',
  '{"jsonrpc":"2.0","method":"toString","id":"t"}',
  '{"jsonrpc":"2.0","method":"hasOwnProperty"}',
  '[{"jsonrpc":"2.0","method":"version"},{"jsonrpc":"2.0","method":"version"}]',
  '[1,2,3]',
  '\u0000',
  '{"jsonrpc":"2.0","method":"version","id":"\u2028"}',
);

/** A line, as a description; `render` makes its bytes (with fresh ids). */
type Line =
  | { t: 'bytes'; bytes: Uint8Array }
  | { t: 'text'; text: string }
  | { t: 'json'; value: unknown }
  | { t: 'deep'; depth: number; shape: 'array' | 'object' | 'call' | 'notification' | 'unclosed' | 'batch' }
  | { t: 'badUtf8'; base: unknown; seq: readonly number[]; at: number }
  | { t: 'padded'; base: unknown; delta: number; leading: boolean };

const lineArb: fc.Arbitrary<Line> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.uint8Array({ maxLength: 80 }).map((a): Line => ({ t: 'bytes', bytes: a.filter((b) => b !== 0x0a) })),
  },
  {
    weight: 2,
    arbitrary: fc
      .string({ unit: fc.constantFrom(...'{}[]":,.-01e \t\rnulltruefalse\\'.split('')), maxLength: 30 })
      .map((text): Line => ({ t: 'text', text })),
  },
  { weight: 2, arbitrary: edgeText.map((text): Line => ({ t: 'text', text })) },
  { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((value): Line => ({ t: 'json', value })) },
  { weight: 8, arbitrary: request.map((value): Line => ({ t: 'json', value })) },
  { weight: 4, arbitrary: batch.map((value): Line => ({ t: 'json', value })) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('deep' as const),
      depth: fc.constantFrom(1_000, 10_000, 25_000),
      shape: fc.constantFrom('array', 'object', 'call', 'notification', 'unclosed', 'batch') as fc.Arbitrary<
        'array' | 'object' | 'call' | 'notification' | 'unclosed' | 'batch'
      >,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('badUtf8' as const),
      base: fc.oneof(call, notification),
      seq: badUtf8,
      at: fc.nat(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('padded' as const),
      base: fc.oneof(call, notification),
      delta: fc.constantFrom(-2, -1, 0, 1, 2, 3, 5_000),
      leading: fc.boolean(),
    }),
  },
);

const encoder = new TextEncoder();

function render(line: Line, ids: Ids): Uint8Array {
  switch (line.t) {
    case 'bytes':
      return line.bytes;
    case 'text':
      return encoder.encode(line.text);
    case 'json':
      return encoder.encode(JSON.stringify(withIds(line.value, ids)));
    case 'deep': {
      const d = line.depth;
      const nested = '['.repeat(d) + ']'.repeat(d);
      const text = {
        array: nested,
        object: `${'{"a":'.repeat(d)}1${'}'.repeat(d)}`,
        call: `{"jsonrpc":"2.0","method":"version","params":[${nested}],"id":${JSON.stringify(ids.fresh(UID_STRING))}}`,
        notification: `{"jsonrpc":"2.0","method":"version","params":[${nested}]}`,
        unclosed: '['.repeat(d),
        batch: `[${nested},{"jsonrpc":"2.0","method":"version","id":${JSON.stringify(ids.fresh(UID_NUMBER))}}]`,
      }[line.shape];
      return encoder.encode(text);
    }
    case 'badUtf8': {
      const base = encoder.encode(JSON.stringify(withIds(line.base, ids)));
      const at = line.at % (base.length + 1);
      return Uint8Array.from([...base.subarray(0, at), ...line.seq, ...base.subarray(at)]);
    }
    case 'padded': {
      const base = JSON.stringify(withIds(line.base, ids));
      const pad = ' '.repeat(Math.max(0, TCP_LIMIT + line.delta - base.length));
      return encoder.encode(line.leading ? pad + base : base + pad);
    }
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Cuts `bytes` at the given points (taken modulo its length). */
function cut(bytes: Uint8Array, points: number[]): Uint8Array[] {
  const at = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const p of [...at, bytes.length]) {
    if (p > from) chunks.push(bytes.subarray(from, p));
    from = Math.max(from, p);
  }
  return chunks;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const isReceive = (v: unknown) => isPlainObject(v) && v.method === 'receive' && !Object.hasOwn(v, 'id');

/**
 * Writes the chunks, then a sentinel call, and collects every reply line up to the sentinel's
 * reply and during a short quiet period after it (replies come in completion order).
 */
async function exchange(client: TcpClient, chunks: Uint8Array[], delays: number[]): Promise<unknown[]> {
  for (const [i, chunk] of chunks.entries()) {
    client.write(Buffer.from(chunk));
    const delay = delays.length > 0 ? delays[i % delays.length]! : 0;
    if (delay === 1) await tick();
    else if (delay === 2) await sleep(2);
  }
  const sentinel = `sentinel-${++idSeq}`;
  client.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'version', id: sentinel })}\n`);
  const replies: unknown[] = [];
  for (;;) {
    const v = await client.next(5000);
    if (isReceive(v)) continue;
    if (isPlainObject(v) && v.id === sentinel) {
      expect(v).toEqual({ jsonrpc: '2.0', result: { version: expect.any(String) }, id: sentinel });
      break;
    }
    replies.push(v);
  }
  await sleep(20);
  while (client.pending > 0) {
    const v = await client.next();
    if (!isReceive(v)) replies.push(v);
  }
  return replies;
}

async function stillServing(d: Daemon): Promise<void> {
  const client = await TcpClient.connect(d.tcp!);
  try {
    const reply = await client.call('version', undefined, 'alive-tcp');
    expect(reply).toEqual({ jsonrpc: '2.0', result: { version: expect.any(String) }, id: 'alive-tcp' });
  } finally {
    client.close();
  }
  const reply = await rpc(d.http!, 'version', undefined, 'alive-http');
  expect(reply).toEqual({ jsonrpc: '2.0', result: { version: expect.any(String) }, id: 'alive-http' });
}

// ---------------------------------------------------------------------------------------------

describe('fuzzing JSON-RPC over TCP', () => {
  const tmp = tmpDir('vigil-fuzz-tcp-');
  let d: Daemon;

  beforeAll(async () => {
    d = await startDaemon(tmp.dir, ACCOUNT, { maxRequestBytes: TCP_LIMIT });
  });

  afterAll(async () => {
    await d?.close();
    tmp.cleanup();
  });

  it('answers every complete line exactly once (none for notifications), however the bytes are cut', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(lineArb, fc.boolean()), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 16 }),
        fc.array(fc.constantFrom(0, 1, 2), { maxLength: 8 }),
        async (lines, points, delays) => {
          const ids = new Ids();
          const parts: Uint8Array[] = [];
          const dues: Due[] = [];
          for (const [line, crlf] of lines) {
            const content = render(line, ids);
            parts.push(content, encoder.encode(crlf ? '\r\n' : '\n'));
            dues.push(...duesForLine(content, crlf, TCP_LIMIT, ids));
          }
          const client = await TcpClient.connect(d.tcp!);
          try {
            const replies = await exchange(client, cut(concat(parts), points), delays);
            checkReplies(replies, dues);
            expect(client.closed).toBe(false);
          } finally {
            client.close();
          }
        },
      ),
      { numRuns: 80 },
    );
    await stillServing(d);
  }, 60_000);
});

describe('fuzzing JSON-RPC over HTTP', () => {
  const tmp = tmpDir('vigil-fuzz-http-');
  let d: Daemon;

  beforeAll(async () => {
    d = await startDaemon(tmp.dir, ACCOUNT);
  });

  afterAll(async () => {
    await d?.close();
    tmp.cleanup();
  });

  /** A body: any line, several lines, pretty-printed JSON, or random bytes with newlines. */
  type Body =
    | { t: 'line'; line: Line }
    | { t: 'lines'; lines: Line[] }
    | { t: 'pretty'; value: unknown }
    | { t: 'raw'; bytes: Uint8Array };
  const bodyArb: fc.Arbitrary<Body> = fc.oneof(
    { weight: 6, arbitrary: lineArb.map((line): Body => ({ t: 'line', line })) },
    {
      weight: 1,
      arbitrary: fc.array(lineArb, { minLength: 2, maxLength: 3 }).map((lines): Body => ({ t: 'lines', lines })),
    },
    { weight: 2, arbitrary: fc.oneof(request, batch).map((value): Body => ({ t: 'pretty', value })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes): Body => ({ t: 'raw', bytes })) },
  );

  function renderBody(body: Body, ids: Ids): Uint8Array {
    switch (body.t) {
      case 'line':
        return render(body.line, ids);
      case 'lines':
        return concat(body.lines.flatMap((l) => [render(l, ids), encoder.encode('\n')]));
      case 'pretty':
        return encoder.encode(JSON.stringify(withIds(body.value, ids), null, 2));
      case 'raw':
        return body.bytes;
    }
  }

  it('answers every body with 200 and the reply due, or 201 and nothing when none is due', async () => {
    await fc.assert(
      fc.asyncProperty(
        bodyArb,
        fc.constantFrom('application/json', 'application/json; charset=utf-8', 'Application/JSON'),
        async (body, contentType) => {
          const ids = new Ids();
          const bytes = renderBody(body, ids);
          const due = dueForMessage(bytes, ids);
          const r = await withTimeout(
            http(d.http!, { headers: { 'content-type': contentType }, body: Buffer.from(bytes) }),
            5000,
            'POST /api/v1/rpc',
          );
          if (due.kind === 'none') {
            expect({ status: r.status, text: r.text }).toEqual({ status: 201, text: '' });
            return;
          }
          expect(r.status).toBe(200);
          expect(String(r.headers['content-type'])).toMatch(/^application\/json/);
          const reply = r.json();
          expect(Array.isArray(reply)).toBe(due.kind === 'batch');
          checkReplies([reply], [due]);
        },
      ),
      { numRuns: 150 },
    );
    await stillServing(d);
  }, 60_000);
});

describe('an oversize TCP line', () => {
  const tmp = tmpDir('vigil-fuzz-oversize-');
  let d: Daemon;

  beforeAll(async () => {
    d = await startDaemon(tmp.dir, ACCOUNT, { maxRequestBytes: SMALL_LIMIT });
  });

  afterAll(async () => {
    await d?.close();
    tmp.cleanup();
  });

  /** Sends `bytes` cut at `points` and returns the replies to the oversize line and to the call. */
  async function oversizeThenCall(content: Uint8Array, crlf: boolean, points: number[]) {
    const id = `after-${++idSeq}`;
    const tail = encoder.encode(`${JSON.stringify({ jsonrpc: '2.0', method: 'version', id })}\n`);
    const bytes = concat([content, encoder.encode(crlf ? '\r\n' : '\n'), tail]);
    const client = await TcpClient.connect(d.tcp!);
    try {
      for (const chunk of cut(bytes, points)) client.write(Buffer.from(chunk));
      const replies: any[] = [];
      while (replies.length < 2) {
        const v = await client.next(5000);
        if (!isReceive(v)) replies.push(v);
      }
      await sleep(20);
      expect(client.pending).toBe(0);
      return { id, replies };
    } finally {
      client.close();
    }
  }

  it('gets "Request too large" and the call after it still gets its result', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: SMALL_LIMIT + 1, max: 6 * SMALL_LIMIT }),
        fc.constantFrom('x', 'notification', 'call', 'bytes'),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        async (size, kind, crlf, points, noise) => {
          const base =
            kind === 'notification'
              ? '{"jsonrpc":"2.0","method":"version","params":{"pad":"'
              : kind === 'call'
                ? `{"jsonrpc":"2.0","method":"version","id":"big-${idSeq}","params":{"pad":"`
                : '';
          const content = new Uint8Array(size).fill(0x78);
          content.set(encoder.encode(base));
          if (kind === 'bytes') {
            // No line end inside (a CR ends a line too, as in Java's readLine).
            for (let i = 0; i < size; i++) {
              const b = noise[i % noise.length]!;
              content[i] = b === 0x0a || b === 0x0d ? 0x0b : b;
            }
          } else if (kind !== 'x') {
            content.set(encoder.encode('"}}'), size - 3);
          }
          const { id, replies } = await oversizeThenCall(content, crlf, points);
          const tooLarge = replies.find((r) => r.id === null);
          const result = replies.find((r) => r.id === id);
          expect(tooLarge).toEqual({
            jsonrpc: '2.0',
            error: { code: INVALID_REQUEST, message: expect.stringMatching(/^Request too large/), data: null },
            id: null,
          });
          expect(result).toEqual({ jsonrpc: '2.0', result: { version: expect.any(String) }, id });
        },
      ),
      { numRuns: 40 },
    );
    await stillServing(d);
  }, 60_000);

  it('takes a line of exactly the limit, and refuses one byte more', async () => {
    const padded = (length: number, id: string) => {
      const base = JSON.stringify({ jsonrpc: '2.0', method: 'version', id });
      return encoder.encode(base + ' '.repeat(length - base.length));
    };
    for (const crlf of [false, true]) {
      const client = await TcpClient.connect(d.tcp!);
      try {
        client.write(Buffer.from(concat([padded(SMALL_LIMIT, 'at-limit'), encoder.encode(crlf ? '\r\n' : '\n')])));
        expect(await client.next()).toEqual({
          jsonrpc: '2.0',
          result: { version: expect.any(String) },
          id: 'at-limit',
        });
        client.write(Buffer.from(concat([padded(SMALL_LIMIT + 1, 'over'), encoder.encode(crlf ? '\r\n' : '\n')])));
        expect(await client.next()).toMatchObject({ jsonrpc: '2.0', error: { code: INVALID_REQUEST }, id: null });
        expect(await client.call('version', undefined, 'next')).toMatchObject({ id: 'next', result: {} });
      } finally {
        client.close();
      }
    }
  });
});

/**
 * Fuzzing every HTTP route of the server (issue 24): random methods, paths with percent-escapes,
 * query strings, headers and bodies (random JSON and mutated completion requests), written as raw
 * HTTP/1.1 on a socket so that nothing is cleaned up on the way, against the server as a real
 * process on the tiny model. Every request gets an answer; none is a 5xx but 503 (documented:
 * loading, stopping); the process never exits. FUZZ_RUNS sets the number of cases (default 4000).
 */
import { connect } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import type { HostPort } from '@vigil/shared-types';
import fc from 'fast-check';
import { request, serveTiny, sharedServer, tinyModel } from './helpers.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 4000);
const tmp = tinyModel();

/** One raw request on a new connection; the status of the reply (0: no status line). */
function raw(addr: HostPort, head: string, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const sock = connect(addr.port, addr.host);
    const chunks: Buffer[] = [];
    sock.setTimeout(30_000, () => {
      sock.destroy();
      reject(new Error(`no answer within 30 s to:\n${head}`));
    });
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', () => {}); // a reset after the reply (the server closed first) is fine
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text });
    });
    sock.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  });
}

const segment = fc.oneof(
  fc.constantFrom('v1', 'models', 'chat', 'completions', 'health', 'metrics', 'tiny', '', '..', '.'),
  fc.constantFrom('%E0', '%', '%zz', '%00', '%2F', '%C0%AF', '%F0%9F%98', '%ED%A0%80', '%25', '%u0041'),
  fc.string({ maxLength: 12 }).map((s) => encodeURIComponent(s)),
  fc.stringMatching(/^[!-~]{0,12}$/).map((s) => s.replace(/[?#]/g, '')),
);
const path = fc.oneof(
  fc.constantFrom('/v1/models', '/v1/models/tiny', '/health', '/metrics', '/v1/chat/completions', '/'),
  fc.array(segment, { maxLength: 5 }).map((parts) => `/${parts.join('/')}`),
  fc.array(segment, { minLength: 1, maxLength: 2 }).map((parts) => `/v1/models/${parts.join('/')}`),
);
const query = fc.option(
  fc.stringMatching(/^[!-~]{0,20}$/).map((s) => `?${s.replace(/#/g, '')}`),
  { nil: '' },
);
const method = fc.constantFrom('GET', 'POST', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'PATCH', 'FOO');
const headerValue = fc.stringMatching(/^[ -~]{0,40}$/).map((s) => s.trim());
const headers = fc.record(
  {
    'content-type': fc.oneof(
      fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/json;;'),
      headerValue,
    ),
    // Mostly none and a loopback Host: most cases get past the browser guards to the routes.
    origin: fc.oneof(
      { weight: 6, arbitrary: fc.constant(undefined) },
      fc.constantFrom('http://evil.example', 'null', 'http://localhost:5173', '%E0'),
      headerValue,
    ),
    host: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('127.0.0.1', 'localhost') },
      fc.constantFrom('evil.example', '[::1]:1', '%E0', ''),
      headerValue,
    ),
    authorization: fc.oneof(fc.constantFrom('Bearer x', 'Bearer', 'Basic %E0'), headerValue),
    'access-control-request-method': fc.constantFrom('POST', 'GET', '%E0'),
    'x-anything': headerValue,
  },
  { requiredKeys: [] },
);
/** Completion requests near the valid ones: each field possibly replaced by anything. */
const anyJson = fc.jsonValue({ maxDepth: 4 });
const completion = fc
  .record(
    {
      model: fc.oneof(fc.constant('tiny'), anyJson),
      messages: fc.oneof(
        fc.constant([{ role: 'user', content: 'hi' }]),
        fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'assistant', 'tool', 'x'), content: anyJson })),
        anyJson,
      ),
      max_tokens: fc.oneof(fc.integer({ min: -2, max: 8 }), anyJson),
      n: fc.oneof(fc.integer({ min: 0, max: 5 }), anyJson),
      stop: fc.oneof(fc.array(fc.string({ maxLength: 8 }), { maxLength: 5 }), anyJson),
      stream: fc.oneof(fc.boolean(), anyJson),
      temperature: fc.oneof(fc.double({ noNaN: true }), anyJson),
      seed: fc.oneof(fc.integer(), anyJson),
      response_format: fc.oneof(
        fc.constant({ type: 'json_object' }),
        fc.record({ type: fc.constant('json_schema'), json_schema: fc.record({ name: fc.string(), schema: anyJson }) }),
        anyJson,
      ),
      tools: fc.oneof(
        fc.array(
          fc.record({
            type: fc.constant('function'),
            function: fc.record({ name: fc.stringMatching(/^[a-z]{1,6}$/), parameters: anyJson }),
          }),
          { maxLength: 3 },
        ),
        anyJson,
      ),
      tool_choice: fc.oneof(fc.constantFrom('auto', 'none', 'required'), anyJson),
    },
    { requiredKeys: ['model', 'messages'] },
  )
  .map((b) => JSON.stringify(b));
const body = fc.oneof(
  fc.constant(''),
  completion,
  completion,
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 64 }),
  fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a).toString('latin1')),
);

describe('fuzzing every route', () => {
  // A small context keeps the completions that happen to be valid short.
  const s = sharedServer(() =>
    serveTiny(tmp.model, ['--context-size', '128', '--allow-origin', 'http://localhost:5173']),
  );

  it(`answers ${RUNS} random requests, never with a 5xx but 503, and stays up`, async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(method, path, query, headers, body, async (m, p, q, h, b) => {
        const data = Buffer.from(b, 'latin1');
        const lines = Object.entries(h)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]) => `${k}: ${v}\r\n`);
        if (!('host' in h)) lines.push('host: 127.0.0.1\r\n');
        const head = `${m} ${p}${q} HTTP/1.1\r\n${lines.join('')}content-length: ${data.length}\r\nconnection: close\r\n\r\n`;
        const r = await raw(s.http, head, data);
        seen.set(r.status, (seen.get(r.status) ?? 0) + 1);
        if (r.status === 0 || (r.status >= 500 && r.status !== 503)) {
          throw new Error(`status ${r.status} for:\n${head}${b.slice(0, 500)}\n---\n${r.text.slice(0, 500)}`);
        }
        expect(s.process.child.exitCode).toBeNull();
      }),
      { numRuns: RUNS },
    );
    expect(s.process.child.exitCode).toBeNull();
    expect((await request(s.http, { method: 'GET', path: '/health' })).status).toBe(200);
    if (process.env.FUZZ_STATS) process.stderr.write(`${JSON.stringify([...seen].sort())}\n`);
    // The cases reach the routes, not only the parser's refusals.
    for (const status of [200, 400, 404]) expect(seen.get(status) ?? 0).toBeGreaterThan(0);
  }, 180_000);
});

/**
 * vigil's one HTTP client and its two typed clients, against real local servers: time and size
 * limits, connections (fresh or kept), failures by kind, JSON-RPC results, errors and batches, the
 * daemon's check, and the inference server's routes with a key read at each request.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { daemonClient, inferenceClient, JsonRpcCallError, Wire, WireError } from '../src/node/index.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server | null = null;
let connections = 0;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(null)));
  server = null;
});

async function serve(handler: Handler): Promise<{ host: string; port: number }> {
  connections = 0;
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => handler(req, res, body));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
}

const json = (res: ServerResponse, value: unknown, status = 200) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};

const failure = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a failure');
    },
    (err: unknown) => err as WireError,
  );

describe('Wire: the one HTTP client', () => {
  it('bounds a request in time and says so (timeout)', async () => {
    const address = await serve(() => {}); // never answers
    const t0 = performance.now();
    const err = await failure(new Wire({ address }, { timeoutMs: 300 }).request({ path: '/' }));
    expect(err).toBeInstanceOf(WireError);
    expect(err).toMatchObject({ kind: 'timeout', code: 'VIGIL_ERR_WIRE_TIMEOUT', message: 'no answer within 300 ms' });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(280);
  });

  it('refuses an answer over the size limit, or keeps its start when told to truncate', async () => {
    const address = await serve((_q, res) => res.end('x'.repeat(100_000)));
    const err = await failure(new Wire({ address }, { maxBytes: 1000 }).request({ path: '/' }));
    expect(err).toMatchObject({ kind: 'too_large', code: 'VIGIL_ERR_WIRE_TOO_LARGE' });
    const cut = await new Wire({ address }, { maxBytes: 1000, overflow: 'truncate' }).request({ path: '/' });
    expect(cut).toMatchObject({ status: 200, truncated: true });
    expect(cut.text).toHaveLength(1000);
    const whole = await new Wire({ address }).request({ path: '/' });
    expect(whole).toMatchObject({ truncated: false });
    expect(whole.text).toHaveLength(100_000);
  });

  it('classifies a refused connection and an abort', async () => {
    const address = await serve(() => {});
    const port = address.port;
    server!.close();
    server = null;
    const refused = await failure(new Wire({ address: { host: '127.0.0.1', port } }).request({ path: '/' }));
    expect(refused).toMatchObject({ kind: 'refused', code: 'VIGIL_ERR_WIRE_REFUSED' });
    expect(refused.message).toContain('ECONNREFUSED');
    const hanging = await serve(() => {});
    const ac = new AbortController();
    const pending = failure(new Wire({ address: hanging }).request({ path: '/', signal: ac.signal }));
    ac.abort();
    expect(await pending).toMatchObject({ kind: 'aborted' });
  });

  it('opens a fresh connection per request by default, and reuses one with keepAlive until close', async () => {
    const address = await serve((_q, res) => res.end('ok'));
    const fresh = new Wire({ address });
    for (let i = 0; i < 3; i++) expect((await fresh.request({ path: '/' })).text).toBe('ok');
    expect(connections).toBe(3);
    const kept = new Wire({ address }, { keepAlive: true });
    for (let i = 0; i < 3; i++) await kept.request({ path: '/' });
    expect(connections).toBe(4);
    kept.close();
    await kept.request({ path: '/' });
    expect(connections).toBe(5);
    kept.close();
  });

  it('sends an object as JSON, with its content type and length', async () => {
    let seen = '';
    const address = await serve((req, res, body) => {
      seen = `${req.method} ${req.url} ${req.headers['content-type']} ${req.headers['content-length']} ${body}`;
      res.end();
    });
    await new Wire({ address }).request({ method: 'POST', path: '/x?y=1', body: { a: 'é' } });
    expect(seen).toBe('POST /x?y=1 application/json 10 {"a":"é"}');
  });
});

describe('daemonClient', () => {
  let down = false;
  const daemon = async () =>
    serve((req, res, body) => {
      if (req.url === '/api/v1/check') {
        if (req.headers.accept === 'application/json') return json(res, { version: '1', account: '+1' }, 503);
        res.statusCode = down ? 503 : 200;
        return res.end();
      }
      if (req.headers['content-type'] !== 'application/json') return json(res, {}, 415);
      const answer = (c: { method: string; id: unknown; params?: { fail?: boolean } }) =>
        c.params?.fail
          ? { jsonrpc: '2.0', id: c.id, error: { code: -32602, message: 'bad param', data: { param: 'fail' } } }
          : { jsonrpc: '2.0', id: c.id, result: { method: c.method } };
      const parsed = JSON.parse(body) as Parameters<typeof answer>[0] | Parameters<typeof answer>[0][];
      // A batch's answers in reverse: the client puts them back in the order of the calls.
      json(res, Array.isArray(parsed) ? parsed.map(answer).reverse() : answer(parsed));
    });

  it('calls a method: its result, or a typed JSON-RPC error with code and data', async () => {
    const client = daemonClient(await daemon());
    expect(await client.rpc('version')).toEqual({ method: 'version' });
    const err = await failure(client.rpc('send', { fail: true }));
    expect(err).toBeInstanceOf(JsonRpcCallError);
    expect(err).toMatchObject({ rpcCode: -32602, data: { param: 'fail' }, code: 'VIGIL_ERR_WIRE_RPC_ERROR' });
    expect(err.message).toBe('send: error -32602: bad param');
  });

  it('sends a batch and gives the answers in the order of the calls', async () => {
    const client = daemonClient(await daemon());
    const answers = await client.batch([
      { method: 'version' },
      { method: 'send', params: { fail: true } },
      { method: 'listGroups' },
    ]);
    expect(answers.map((a) => (a.ok ? a.result : (a.error as JsonRpcCallError).rpcCode))).toEqual([
      { method: 'version' },
      -32602,
      { method: 'listGroups' },
    ]);
  });

  it('reads the check (200 serving, 503 not) and the JSON status of either', async () => {
    const address = await daemon();
    const client = daemonClient(address);
    expect(await client.check()).toBe(true);
    expect(await client.status()).toEqual({ serving: false, status: { version: '1', account: '+1' } });
    down = true;
    expect(await client.check()).toBe(false);
    down = false;
  });

  it('reports an answer that is not JSON-RPC as a bad reply, and a refused call by kind', async () => {
    const address = await serve((_q, res) => res.end('<html>'));
    const err = await failure(daemonClient(address).rpc('version'));
    expect(err).toMatchObject({ kind: 'bad_reply', status: 200 });
    server!.close();
    server = null;
    expect(await failure(daemonClient(address).rpc('version'))).toMatchObject({ kind: 'refused' });
  });
});

describe('inferenceClient', () => {
  it('lists models, probes, reads /health and /metrics, with the key read at each request', async () => {
    const seen: string[] = [];
    const address = await serve((req, res, body) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'} ${body}`.trim());
      if (req.url === '/v1/models') return json(res, { object: 'list', data: [{ id: 'tiny' }] });
      if (req.url === '/health') return json(res, { status: 'ok', progress: { in_flight: 1, stalled: 0 } });
      if (req.url === '/metrics') return res.end('inference_requests_total 3\n');
      json(res, { choices: [{ message: { role: 'assistant', content: 'hi' } }] });
    });
    let key = 'k1';
    const client = inferenceClient({ address, apiKey: () => key });
    expect((await client.models()).data.map((m) => m.id)).toEqual(['tiny']);
    key = 'k2';
    const probe = await client.probe('tiny');
    expect(probe.status).toBe(200);
    expect(probe.text).toContain('"content"');
    expect(await client.health()).toMatchObject({ status: 200, health: { progress: { in_flight: 1 } } });
    expect(await client.metrics()).toBe('inference_requests_total 3\n');
    expect(seen).toEqual([
      'GET /v1/models Bearer k1',
      'POST /v1/chat/completions Bearer k2 {"model":"tiny","messages":[{"role":"user","content":"ping"}],"max_tokens":2,"temperature":0}',
      'GET /health Bearer k2',
      'GET /metrics Bearer k2',
    ]);
  });

  it('fails the model list on an error status, with the status and an excerpt', async () => {
    const address = await serve((_q, res) => json(res, { error: { message: 'down' } }, 500));
    const err = await failure(inferenceClient({ address }).models());
    expect(err).toMatchObject({ kind: 'http', status: 500 });
    expect(err.message).toBe('/v1/models: HTTP 500: {"error":{"message":"down"}}');
  });
});

/**
 * One request must not crash, freeze or bloat the server (issue 24): malformed request lines,
 * a bug in one request, oversized stop strings. The server as a real process on the tiny model.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { ServerContext } from '../src/context.js';
import { memoryLogger } from '../src/index.js';
import { createHandler } from '../src/routes.js';
import { errorBody, request, serveTiny, sharedServer, tinyModel } from './helpers.js';

const tmp = tinyModel();

describe('malformed request lines', () => {
  const s = sharedServer(() => serveTiny(tmp.model));

  it('answers GET /v1/models/%E0 (a malformed percent-escape) with 404 and stays up', async () => {
    for (const path of ['/v1/models/%E0', '/v1/models/%', '/v1/models/%zz%E0%A4', '/v1/models/%C0%AF']) {
      const r = await request(s.http, { method: 'GET', path });
      expect(r.status).toBe(404);
      expect(r.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'model_not_found' } });
    }
    const ok = await request(s.http, { method: 'GET', path: '/v1/models/tiny' });
    expect(ok.status).toBe(200);
    expect(s.process.child.exitCode).toBeNull();
  });

  it('answers odd paths and query strings in OpenAI shape, never with a 5xx', async () => {
    for (const path of ['/v1/models?%E0', '/health?x=%', '/%E0', '/v1/chat/completions?%%', '/v1//models']) {
      const r = await request(s.http, { method: 'GET', path });
      expect(r.status).toBeLessThan(500);
      if (r.status !== 200) expect(r.json()).toHaveProperty('error.message');
    }
    expect(s.process.child.exitCode).toBeNull();
  });
});

describe('the last resort', () => {
  let server: Server | undefined;
  afterAll(() => {
    server?.close();
  });

  it('answers 500 in OpenAI shape for a request whose handling throws, logs it once, and serves the next', async () => {
    const records: Record<string, unknown>[] = [];
    const logger = memoryLogger(records);
    let broken = true;
    const access: number[] = [];
    const ctx = {
      config: { modelIds: ['tiny'], createdAt: 0, http: null, allowOrigins: [], apiKey: null },
      logger,
      responses: { open: 0 },
      access: (_req: unknown, _l: unknown, _t: unknown, status: number) => access.push(status),
      state: () => {
        if (broken) throw new TypeError('a bug in one request');
        return 'ready';
      },
    } as unknown as ServerContext;
    server = createServer(createHandler(ctx, 'http'));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const addr = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
    const r = await request(addr, { method: 'GET', path: '/v1/models' });
    expect(r.status).toBe(500);
    expect(r.json()).toEqual(errorBody('server_error', 'internal_error'));
    const lines = records.filter((l) => l.level === 'error');
    expect(lines).toHaveLength(1);
    expect(JSON.stringify(lines[0])).toContain('a bug in one request');
    broken = false;
    expect((await request(addr, { method: 'GET', path: '/v1/models' })).status).toBe(200);
    expect(access).toEqual([500, 200]);
  });
});

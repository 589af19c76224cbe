/**
 * What a web page in the user's browser can make the server do (issue 17): nothing, unless its
 * origin is allowed. The server as a real process on the generated tiny model, raw HTTP requests
 * shaped as a browser sends them, and the access log the guardian reads.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { makeTiny, readLines, request, type ServerProcess, spawnServer, tmpDir, waitHealthy } from './helpers.js';

const tmp = tmpDir();
const MODEL = join(tmp.dir, 'tiny.gguf');
const COMPLETION = JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
const ALLOWED = 'http://localhost:5173';

beforeAll(async () => {
  await makeTiny(MODEL);
});
afterAll(() => tmp.cleanup());

describe('browsers it did not invite', () => {
  let s: ServerProcess;
  const accessLog = join(tmp.dir, 'access.log');

  beforeAll(async () => {
    s = await spawnServer(
      ['--model', MODEL, '--model-id', 'tiny', '--http', '127.0.0.1:0', '--access-log', accessLog],
      { INFERENCE_SERVER_ALLOW_ORIGIN: `${ALLOWED}, https://chat.example.org` },
    );
    await waitHealthy(s.http!);
  });
  afterAll(() => {
    s?.child.kill('SIGKILL');
  });

  const completions = () => readLines(accessLog).filter((l) => l.msg === 'request completed');

  it("refuses a page's text/plain POST (no preflight needed) with 403, and no completion runs", async () => {
    const r = await request(s.http!, {
      body: COMPLETION,
      headers: { 'content-type': 'text/plain;charset=UTF-8', origin: 'http://evil.example' },
    });
    expect(r.status).toBe(403);
    expect(r.json()).toEqual({
      error: {
        message: expect.stringContaining('http://evil.example'),
        type: 'invalid_request_error',
        param: null,
        code: 'origin_not_allowed',
      },
    });
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
    // The same from an origin that is not a web origin at all (a sandboxed frame, a file).
    const nullOrigin = await request(s.http!, {
      body: COMPLETION,
      headers: { 'content-type': 'application/json', origin: 'null' },
    });
    expect(nullOrigin.status).toBe(403);
    await new Promise((r) => setTimeout(r, 200));
    // No "request completed": the guardian does not take the page's requests for work.
    expect(completions()).toEqual([]);
    const refused = readLines(accessLog).filter((l) => l.status === 403);
    expect(refused).toHaveLength(2);
    expect(refused.every((l) => l.msg === 'request')).toBe(true);
  });

  it("refuses a foreign origin's preflight with 403 and no CORS headers, and its GETs too", async () => {
    const pre = await request(s.http!, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://evil.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(pre.status).toBe(403);
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    expect(pre.headers['access-control-allow-methods']).toBeUndefined();
    const models = await request(s.http!, { path: '/v1/models', headers: { origin: 'http://evil.example' } });
    expect(models.status).toBe(403);
  });

  it('refuses a body that is not application/json with 415, from any client', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const r = await request(s.http!, { body: COMPLETION, headers: { 'content-type': type } });
      expect(r.status).toBe(415);
      expect(r.json().error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_media_type' });
    }
    // No Content-Type at all (fetch with a Blob body sends none, without a preflight).
    const none = await request(s.http!, { body: COMPLETION, headers: {} });
    expect(none.status).toBe(415);
    const json = await request(s.http!, {
      body: COMPLETION,
      headers: { 'content-type': 'Application/JSON; charset=utf-8' },
    });
    expect(json.status).toBe(200);
  });

  it('serves an allowed origin: its preflight gets the CORS headers, its completions run', async () => {
    const pre = await request(s.http!, {
      method: 'OPTIONS',
      headers: {
        origin: ALLOWED,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type, x-stainless-os',
      },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers).toMatchObject({
      'access-control-allow-origin': ALLOWED,
      'access-control-allow-methods': expect.stringContaining('POST'),
      'access-control-allow-headers': 'authorization, content-type, x-stainless-os',
      vary: 'Origin',
    });
    await new Promise((r) => setTimeout(r, 200));
    const before = completions().length;
    const r = await request(s.http!, {
      body: COMPLETION,
      headers: { 'content-type': 'application/json', origin: ALLOWED },
    });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBe(ALLOWED);
    expect(r.json().choices[0].message.content.length).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(completions().length).toBe(before + 1);
  });

  it('checks the Host header in any case (DNS rebinding): 421 for a foreign name, loopback names served', async () => {
    for (const host of ['evil.example', 'EVIL.example:1337', '10.0.0.7']) {
      const r = await request(s.http!, { path: '/v1/models', headers: { host } });
      expect(r.status).toBe(421);
    }
    for (const host of ['LOCALHOST:1337', '127.0.0.1', `127.0.0.1:${s.http!.port}`, 'Localhost']) {
      const r = await request(s.http!, { path: '/v1/models', headers: { host } });
      expect(r.status).toBe(200);
    }
  });
});

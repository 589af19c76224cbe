/**
 * What a web page in the user's browser can make the server do (issue 17): nothing, unless its
 * origin is allowed. The server as a real process on the generated tiny model, raw HTTP requests
 * shaped as a browser sends them, and the access log the guardian reads.
 */
import { execFile } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { BIN, chat, errorBody, readLines, request, serveTiny, sharedServer, tinyModel } from './helpers.js';

const tmp = tinyModel();
const COMPLETION = JSON.stringify(chat('hi', { max_tokens: 3 }));
const ALLOWED = 'http://localhost:5173';

describe('browsers it did not invite', () => {
  const accessLog = join(tmp.dir, 'access.log');
  const s = sharedServer(() =>
    serveTiny(tmp.model, ['--access-log', accessLog], {
      INFERENCE_SERVER_ALLOW_ORIGIN: `${ALLOWED}, https://chat.example.org`,
    }),
  );

  const completions = () => readLines(accessLog).filter((l) => l.msg === 'request completed');

  it("refuses a page's text/plain POST (no preflight needed) with 403, and no completion runs", async () => {
    const r = await request(s.http, {
      body: COMPLETION,
      headers: { 'content-type': 'text/plain;charset=UTF-8', origin: 'http://evil.example' },
    });
    expect(r.status).toBe(403);
    expect(r.json()).toEqual(
      errorBody('invalid_request_error', 'origin_not_allowed', expect.stringContaining('http://evil.example')),
    );
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
    // The same from an origin that is not a web origin at all (a sandboxed frame, a file).
    const nullOrigin = await request(s.http, {
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
    const pre = await request(s.http, {
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
    const models = await request(s.http, { path: '/v1/models', headers: { origin: 'http://evil.example' } });
    expect(models.status).toBe(403);
  });

  it('refuses a body that is not application/json with 415, from any client', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
      const r = await request(s.http, { body: COMPLETION, headers: { 'content-type': type } });
      expect(r.status).toBe(415);
      expect(r.json().error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_media_type' });
    }
    // No Content-Type at all (fetch with a Blob body sends none, without a preflight).
    const none = await request(s.http, { body: COMPLETION, headers: {} });
    expect(none.status).toBe(415);
    const json = await request(s.http, {
      body: COMPLETION,
      headers: { 'content-type': 'Application/JSON; charset=utf-8' },
    });
    expect(json.status).toBe(200);
  });

  it('serves an allowed origin: its preflight gets the CORS headers, its completions run', async () => {
    const pre = await request(s.http, {
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
    const r = await request(s.http, {
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
      const r = await request(s.http, { path: '/v1/models', headers: { host } });
      expect(r.status).toBe(421);
    }
    for (const host of ['LOCALHOST:1337', '127.0.0.1', `127.0.0.1:${s.http.port}`, 'Localhost']) {
      const r = await request(s.http, { path: '/v1/models', headers: { host } });
      expect(r.status).toBe(200);
    }
  });
});

/** Runs the CLI under umask 022, as a user's shell usually has it. */
const underUmask = (args: string[]) =>
  promisify(execFile)('/bin/sh', ['-c', 'umask 022 && exec "$0" "$@"', process.execPath, BIN, ...args], {
    timeout: 60_000,
  });

/** Every path under `dir` with its permission bits. */
function modes(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      const st = statSync(p);
      out[relative(dir, p)] = (st.mode & 0o777).toString(8);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

describe('file modes whatever the umask', () => {
  it('creates every directory 0700 and keys and logs 0600; models, certificates and manifests stay 0644', async () => {
    const home = join(tmp.dir, 'home');
    const data = join(home, '.local', 'share', 'vigil');
    await underUmask(['make-model', '--out', join(data, 'models', 'tiny.gguf')]);
    await underUmask(['certs', '--out', join(data, 'pki')]);
    await underUmask(['keygen', '--out', join(data, 'keys')]);
    await underUmask([
      'manifest',
      '--model',
      join(data, 'models', 'tiny.gguf'),
      '--out',
      join(data, 'm', 'manifest.json'),
    ]);
    const logs = join(home, '.local', 'state', 'vigil', 'logs');
    const serve = execFile('/bin/sh', [
      '-c',
      'umask 022 && exec "$0" "$@"',
      process.execPath,
      BIN,
      'serve',
      '--model',
      join(data, 'models', 'tiny.gguf'),
      '--http',
      '127.0.0.1:0',
      '--access-log',
      join(logs, 'access.log'),
      '--log-file',
      join(logs, 'inference-server.log'),
    ]);
    try {
      const deadline = Date.now() + 20_000;
      while (!modes(home)['.local/state/vigil/logs/access.log'] && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      serve.kill('SIGKILL');
    }
    const found = modes(home);
    const publicFiles = new Set([
      'models/tiny.gguf',
      'pki/ca.pem',
      'pki/server.pem',
      'pki/client.pem',
      'keys/manifest-key.pub.pem',
      'm/manifest.json',
    ]);
    const expected: Record<string, string> = {};
    for (const path of Object.keys(found)) {
      const st = statSync(join(home, path));
      const rel = relative('.local/share/vigil', path);
      expected[path] = st.isDirectory() ? '700' : publicFiles.has(rel) ? '644' : '600';
    }
    expect(found).toEqual(expected);
    // The private files are all there.
    expect(found).toMatchObject({
      '.local/share/vigil': '700',
      '.local/share/vigil/models': '700',
      '.local/share/vigil/pki/ca-key.pem': '600',
      '.local/share/vigil/pki/server-key.pem': '600',
      '.local/share/vigil/pki/client-key.pem': '600',
      '.local/share/vigil/keys/manifest-key.pem': '600',
      '.local/state/vigil/logs': '700',
      '.local/state/vigil/logs/access.log': '600',
      '.local/state/vigil/logs/inference-server.log': '600',
    });
  });
});

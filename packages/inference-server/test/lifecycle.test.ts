/**
 * The process around the model: start-up failures with their lines and exit codes, the
 * environment, the manifest, mutual TLS, and shutdown that always finishes.
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import forge from 'node-forge';
import {
  BIG_CONTEXT,
  chat,
  cli,
  exited,
  LONG,
  lastEventBeforeDone,
  occupy,
  openaiClient,
  request,
  SseCompletion,
  serveTiny,
  spawnServer,
  tinyModel,
  waitBusy,
  waitHealthy,
  withServer,
} from './helpers.js';

const tmp = tinyModel();

/** A client certificate signed by the given CA that expired yesterday. */
function expiredClient(caPem: Buffer, caKeyPem: Buffer): { cert: string; key: string } {
  const ca = forge.pki.certificateFromPem(caPem.toString());
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const k = forge.pki.privateKeyFromPem(key);
  const c = forge.pki.createCertificate();
  c.publicKey = forge.pki.setRsaPublicKey(k.n, k.e);
  c.serialNumber = '0a1b2c';
  c.validity.notBefore = new Date(Date.now() - 10 * 86_400_000);
  c.validity.notAfter = new Date(Date.now() - 86_400_000);
  c.setSubject([{ name: 'commonName', value: 'vigil-client' }]);
  c.setIssuer(ca.subject.attributes);
  c.setExtensions([{ name: 'extKeyUsage', clientAuth: true }]);
  c.sign(forge.pki.privateKeyFromPem(caKeyPem.toString()), forge.md.sha256.create());
  return { cert: forge.pki.certificateToPem(c), key };
}
const MODEL = tmp.model;
const OTHER = join(tmp.dir, 'other', 'tiny.gguf');

beforeAll(async () => {
  await cli(['make-model', '--out', OTHER, '--seed', '2']).catch(() => null);
});

describe('start-up failures: one clear line, a non-zero exit, nothing served', () => {
  it('exits 78 when the model file is missing', async () => {
    const r = await cli(['serve', '--model', join(tmp.dir, 'missing.gguf'), '--http', '127.0.0.1:0']);
    expect(r.code).toBe(78);
    expect(r.stderr).toBe(`inference-server: model file not found: ${join(tmp.dir, 'missing.gguf')}\n`);
  });

  it('exits 78 for bad configuration', async () => {
    expect((await cli(['serve', '--model', MODEL, '--http', 'nonsense'])).code).toBe(78);
    expect((await cli(['serve', '--model', MODEL, '--parallel', '0'])).code).toBe(78);
    expect((await cli(['serve', '--model', MODEL, '--http', '0.0.0.0:0'])).stderr).toContain('--allow-non-loopback');
    const r = await cli(['serve', '--model', MODEL, '--mtls', '127.0.0.1:0']);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('--tls-cert');
    const origin = await cli(['serve', '--model', MODEL, '--http', '127.0.0.1:0', '--allow-origin', 'evil.example']);
    expect(origin.code).toBe(78);
    expect(origin.stderr).toContain('--allow-origin evil.example');
  });

  it('says "address already in use" and exits 1 when its port is taken', async () => {
    const busy = await occupy();
    try {
      const port = (busy.address() as { port: number }).port;
      const r = await cli(['serve', '--model', MODEL, '--http', `127.0.0.1:${port}`]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`inference-server: cannot listen for HTTP on 127.0.0.1:${port}: address already in use\n`);
      // ...and in the log, where the guardian looks for fatal patterns.
      expect(r.stdout).toContain('address already in use');
    } finally {
      busy.close();
    }
  });

  it('says "manifest verification failed" and exits 1 when the model does not match its manifest', async () => {
    const manifest = join(tmp.dir, 'other-manifest.json');
    expect((await cli(['manifest', '--model', OTHER, '--out', manifest])).code).toBe(0);
    const r = await cli(['serve', '--model', MODEL, '--http', '127.0.0.1:0', '--manifest', manifest]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^inference-server: manifest verification failed: tiny\.gguf has sha256 [0-9a-f]{64}, the manifest says [0-9a-f]{64}\n$/,
    );
    expect(r.stdout).toContain('manifest verification failed');
    expect(r.stdout).not.toContain('"listening"');
  });

  it('says "signature invalid" and exits 1 when the manifest is not signed by the given key', async () => {
    const keys = join(tmp.dir, 'keys');
    const wrong = join(tmp.dir, 'wrong-keys');
    expect((await cli(['keygen', '--out', keys])).code).toBe(0);
    expect((await cli(['keygen', '--out', wrong])).code).toBe(0);
    const manifest = join(tmp.dir, 'signed.json');
    const made = await cli(['manifest', '--model', MODEL, '--out', manifest, '--sign', join(keys, 'manifest-key.pem')]);
    expect(made.code).toBe(0);
    const r = await cli([
      'serve',
      '--model',
      MODEL,
      '--http',
      '127.0.0.1:0',
      '--manifest',
      manifest,
      '--manifest-key',
      join(wrong, 'manifest-key.pub.pem'),
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^inference-server: signature invalid: .*signed\.json does not match its signature\n$/);
  });

  it('serves a model whose signed manifest verifies, configured only through the environment', async () => {
    const keys = join(tmp.dir, 'keys');
    const manifest = join(tmp.dir, 'signed.json');
    const access = join(tmp.dir, 'env-access.log');
    const started = spawnServer([], {
      INFERENCE_SERVER_MODEL: MODEL,
      INFERENCE_SERVER_MODEL_ID: 'a,b',
      INFERENCE_SERVER_HTTP: '127.0.0.1:0',
      INFERENCE_SERVER_MANIFEST: manifest,
      INFERENCE_SERVER_MANIFEST_KEY: join(keys, 'manifest-key.pub.pem'),
      INFERENCE_SERVER_ACCESS_LOG: access,
      INFERENCE_SERVER_PARALLEL: '1',
    });
    await withServer(started, async (s) => {
      expect(s.output()).toContain('"msg":"manifest verified"');
      const models = await request(s.http!, { path: '/v1/models' });
      expect(models.json().data.map((m: { id: string }) => m.id)).toEqual(['a', 'b']);
      const r = await request(s.http!, { body: chat('hi', { model: 'b', max_tokens: 2 }) });
      expect(r.status).toBe(200);
      await new Promise((res) => setTimeout(res, 100));
      expect(readFileSync(access, 'utf8')).toContain('"msg":"request completed"');
    });
  });
});

describe('mutual TLS', () => {
  const pki = join(tmp.dir, 'pki');
  const otherPki = join(tmp.dir, 'other-pki');
  const read = (dir: string, f: string) => readFileSync(join(dir, f));
  let s: Awaited<ReturnType<typeof spawnServer>>;

  beforeAll(async () => {
    expect((await cli(['certs', '--out', pki])).code).toBe(0);
    expect((await cli(['certs', '--out', otherPki])).code).toBe(0);
    s = await spawnServer([
      '--model',
      MODEL,
      '--model-id',
      'tiny',
      '--http',
      'off',
      '--mtls',
      '127.0.0.1:0',
      '--tls-cert',
      join(pki, 'server.pem'),
      '--tls-key',
      join(pki, 'server-key.pem'),
      '--tls-ca',
      join(pki, 'ca.pem'),
    ]);
  });
  afterAll(() => {
    s?.child.kill('SIGKILL');
  });

  const good = () => ({
    ca: read(pki, 'ca.pem'),
    cert: read(pki, 'client.pem'),
    key: read(pki, 'client-key.pem'),
    servername: 'localhost',
  });

  it('serves the same routes to a client with a certificate from --tls-ca', async () => {
    expect(s.http).toBeNull();
    await waitHealthy(s.mtls!, 20_000, good());
    const models = await request(s.mtls!, { path: '/v1/models', tls: good() });
    expect(models.status).toBe(200);
    expect(models.json().data[0].id).toBe('tiny');
    const r = await request(s.mtls!, { body: chat('hi', { max_tokens: 3 }), tls: good() });
    expect(r.status).toBe(200);
    expect(r.json().choices[0].message.content.length).toBeGreaterThan(0);
  });

  it('refuses a client without a certificate at the handshake', async () => {
    await expect(request(s.mtls!, { path: '/v1/models', tls: { ca: read(pki, 'ca.pem') } })).rejects.toThrow();
  });

  it('refuses a client whose certificate another CA signed', async () => {
    await expect(
      request(s.mtls!, {
        path: '/v1/models',
        tls: { ca: read(pki, 'ca.pem'), cert: read(otherPki, 'client.pem'), key: read(otherPki, 'client-key.pem') },
      }),
    ).rejects.toThrow();
  });

  it('refuses an expired client certificate from --tls-ca, and logs every refusal at warn with its reason, once per episode', async () => {
    const expired = expiredClient(read(pki, 'ca.pem'), read(pki, 'ca-key.pem'));
    await expect(
      request(s.mtls!, { path: '/v1/models', tls: { ca: read(pki, 'ca.pem'), ...expired } }),
    ).rejects.toThrow();
    // A client that hammers with a foreign certificate: one line, not one per attempt.
    for (let i = 0; i < 5; i++) {
      await request(s.mtls!, {
        path: '/v1/models',
        tls: { ca: read(pki, 'ca.pem'), cert: read(otherPki, 'client.pem'), key: read(otherPki, 'client-key.pem') },
      }).catch(() => null);
    }
    await s.waitForLog('client certificate expired');
    const refusals = s
      .output()
      .split('\n')
      .filter((l) => l.includes('mTLS handshake refused'))
      .map((l) => JSON.parse(l));
    expect(refusals.every((r) => r.level === 'warn' && r.remote === '127.0.0.1')).toBe(true);
    expect(refusals.map((r) => r.reason).sort()).toEqual([
      'client certificate expired',
      'client certificate not signed by --tls-ca (unknown CA)',
      'no client certificate',
    ]);
  });
});

describe('shutdown', () => {
  it('on SIGTERM: stops accepting, lets short work finish, aborts long work with clear errors, exits 0 within grace + 2 s', async () => {
    const started = serveTiny(MODEL, [...BIG_CONTEXT, '--shutdown-grace', '1', '--parallel', '3']);
    await withServer(started, async (s) => {
      const openai = openaiClient(s.http!);
      const stream = await SseCompletion.open(s.http!, LONG);
      await stream.waitFor(3);
      const longPlain = request(s.http!, { body: LONG });
      const short = openai.chat.completions.create(chat('short', { max_tokens: 50 }));
      // The signal comes once all three are generating.
      await waitBusy(s.http!, 3);
      const t0 = Date.now();
      s.child.kill('SIGTERM');
      const exit = exited(s.child);
      // The short one finishes inside the grace.
      expect((await short).choices[0]!.finish_reason).toBe('length');
      // The long ones are stopped with clear errors.
      const plain = await longPlain;
      expect(plain.status).toBe(503);
      expect(plain.json().error).toMatchObject({ type: 'server_error', code: 'shutting_down' });
      expect(await lastEventBeforeDone(stream)).toMatchObject({ error: { code: 'shutting_down' } });
      // Exit 0 is the graceful path: the server's own timer ends it with exit 1 at grace + 1.8 s,
      // so a 0 says it finished inside the bound. The wall time seen here only guards against a
      // hang (it includes this loaded test process's own delays).
      expect(await exit).toEqual({ code: 0, signal: null });
      expect(Date.now() - t0).toBeLessThan(10_000);
      expect(s.output()).toContain('"msg":"stopped"');
      // Nothing listens any more.
      await expect(request(s.http!, { path: '/health' })).rejects.toThrow();
    });
  });

  it('exits at once on a second signal', async () => {
    await withServer(serveTiny(MODEL, [...BIG_CONTEXT, '--shutdown-grace', '60']), async (s) => {
      const stream = await SseCompletion.open(s.http!, LONG);
      await stream.waitFor(3);
      s.child.kill('SIGTERM');
      await s.waitForLog('"msg":"stopping"');
      s.child.kill('SIGTERM');
      expect(await exited(s.child)).toEqual({ code: 1, signal: null });
      stream.close();
    });
  });

  it('stops cleanly when SIGTERM comes while the model is still loading', async () => {
    const s = await spawnServer(['--model', MODEL, '--http', '127.0.0.1:0']);
    s.child.kill('SIGTERM');
    expect(await exited(s.child)).toEqual({ code: 0, signal: null });
  });
});

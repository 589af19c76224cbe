/** The parts without a model: request validation, the scheduler, manifests, certificates. */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import {
  ApiError,
  createManifest,
  generateCerts,
  generateSigningKey,
  ManifestError,
  makeModel,
  memoryLogger,
  parseCompletionRequest,
  QueueFullError,
  refusalLog,
  refusalReason,
  retryAfterEstimate,
  Scheduler,
  verifyManifest,
  writeManifest,
} from '../src/index.js';
import { cli, request, tmpDir } from './helpers.js';

const tmp = tmpDir();
afterAll(() => tmp.cleanup());

const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

function badParam(body: unknown): { status: number; param: string | null; message: string } {
  try {
    parseCompletionRequest(body);
  } catch (err) {
    const e = err as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect(e.toJSON()).toEqual({
      error: { message: e.message, type: 'invalid_request_error', param: e.param, code: e.openaiCode },
    });
    return { status: e.status, param: e.param, message: e.message };
  }
  throw new Error('accepted');
}

describe('chat completion requests', () => {
  it('takes what OpenAI clients send, with defaults', () => {
    expect(parseCompletionRequest(base)).toEqual({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      maxTokens: null,
      temperature: 1,
      topP: 1,
      seed: null,
      stop: [],
      stream: false,
      includeUsage: false,
      frequencyPenalty: 0,
      presencePenalty: 0,
      n: 1,
      tools: [],
      toolChoice: 'none',
      parallelToolCalls: true,
      responseFormat: { type: 'text' },
    });
    const r = parseCompletionRequest({
      ...base,
      messages: [
        { role: 'developer', content: 'be brief' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'a' },
            { type: 'text', text: 'b' },
          ],
        },
        { role: 'assistant', content: null },
      ],
      max_tokens: 9,
      max_completion_tokens: 5,
      temperature: 0,
      top_p: 0.5,
      seed: 42,
      stop: ['x', ''],
      stream: true,
      stream_options: { include_usage: true },
      user: 'someone',
      n: 1,
    });
    expect(r).toMatchObject({
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'ab' },
        { role: 'assistant', content: '' },
      ],
      maxTokens: 5,
      temperature: 0,
      topP: 0.5,
      seed: 42,
      stop: ['x'],
      stream: true,
      includeUsage: true,
    });
    expect(parseCompletionRequest({ ...base, stop: 'END' }).stop).toEqual(['END']);
  });

  it('refuses bad fields with 400 naming the parameter', () => {
    expect(badParam(null)).toMatchObject({ status: 400 });
    expect(badParam([])).toMatchObject({ status: 400 });
    expect(badParam({ messages: base.messages })).toMatchObject({ param: 'model' });
    expect(badParam({ model: 'm' })).toMatchObject({ param: 'messages' });
    expect(badParam({ model: 'm', messages: [] })).toMatchObject({ param: 'messages' });
    expect(badParam({ model: 'm', messages: ['hi'] })).toMatchObject({ param: 'messages[0]' });
    expect(badParam({ model: 'm', messages: [{ role: 'function', content: 'x' }] })).toMatchObject({
      param: 'messages[0].role',
    });
    expect(badParam({ model: 'm', messages: [{ role: 'user', content: 5 }] })).toMatchObject({
      param: 'messages[0].content',
    });
    expect(
      badParam({ model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] }),
    ).toMatchObject({ param: 'messages[0].content' });
    expect(badParam({ ...base, max_tokens: 0 })).toMatchObject({ param: 'max_tokens' });
    expect(badParam({ ...base, max_tokens: 1.5 })).toMatchObject({ param: 'max_tokens' });
    expect(badParam({ ...base, max_completion_tokens: '5' })).toMatchObject({ param: 'max_completion_tokens' });
    expect(badParam({ ...base, temperature: 3 })).toMatchObject({ param: 'temperature' });
    expect(badParam({ ...base, top_p: -0.1 })).toMatchObject({ param: 'top_p' });
    expect(badParam({ ...base, seed: 'x' })).toMatchObject({ param: 'seed' });
    expect(badParam({ ...base, stop: [1] })).toMatchObject({ param: 'stop' });
    expect(badParam({ ...base, stop: ['a', 'b', 'c', 'd', 'e'] })).toMatchObject({ param: 'stop' });
    expect(badParam({ ...base, stream: 'yes' })).toMatchObject({ param: 'stream' });
    expect(badParam({ ...base, stream_options: { include_usage: true } })).toMatchObject({ param: 'stream_options' });
    expect(badParam({ ...base, n: 5 })).toMatchObject({ param: 'n' });
    expect(badParam({ ...base, tools: [{ type: 'function' }] })).toMatchObject({ param: 'tools[0].function' });
    expect(badParam({ ...base, response_format: { type: 'xml' } })).toMatchObject({ param: 'response_format' });
  });

  // Every field with a value of the wrong type: 400, invalid_type, `param` the field (issue 17).
  const wrongTypes: [string, Record<string, unknown>][] = [
    ['model', { model: 5 }],
    ['messages', { messages: 'hi' }],
    ['messages[0].role', { messages: [{ role: 5, content: 'x' }] }],
    ['messages[0].name', { messages: [{ role: 'user', content: 'x', name: 1 }] }],
    ['max_tokens', { max_tokens: '5' }],
    ['max_completion_tokens', { max_completion_tokens: true }],
    ['temperature', { temperature: '0.5' }],
    ['top_p', { top_p: [] }],
    ['frequency_penalty', { frequency_penalty: 'x' }],
    ['presence_penalty', { presence_penalty: {} }],
    ['seed', { seed: 1.5 }],
    ['stop', { stop: 5 }],
    ['stream', { stream: 'yes' }],
    ['stream_options', { stream: true, stream_options: 'x' }],
    ['stream_options.include_usage', { stream: true, stream_options: { include_usage: 'yes' } }],
    ['n', { n: '1' }],
    ['tools', { tools: 'x' }],
    ['tools[0]', { tools: ['x'] }],
    ['tool_choice', { tool_choice: 5 }],
    ['parallel_tool_calls', { parallel_tool_calls: 'no' }],
    ['functions', { functions: {} }],
    ['function_call', { function_call: 1 }],
    ['logprobs', { logprobs: 'x' }],
    ['top_logprobs', { top_logprobs: 'x' }],
    ['logit_bias.50256', { logit_bias: { '50256': 'x' } }],
    ['response_format', { response_format: 'json' }],
    ['user', { user: 42 }],
    ['metadata', { metadata: 'x' }],
    ['store', { store: 1 }],
    ['modalities', { modalities: 'text' }],
  ];
  it.each(wrongTypes)('refuses a wrong type for %s with 400 naming it', (param, fields) => {
    const e = badParam({ ...base, ...fields });
    expect(e).toMatchObject({ status: 400, param });
    expect(e.message).toContain(param);
  });

  it('ignores fields it does not know and takes null for an absent optional field, as OpenAI does', () => {
    const r = parseCompletionRequest({
      ...base,
      some_future_field: { x: 1 },
      temperature: null,
      tools: [],
      stop: null,
    });
    expect(r).toMatchObject({ temperature: 1, stop: [] });
  });
});

describe('scheduler', () => {
  it('hands out slots, queues in order up to the limit, refuses beyond it, and passes slots on', async () => {
    const s = new Scheduler(2, 1);
    const never = new AbortController().signal;
    const a = await s.acquire(never);
    const b = await s.acquire(never);
    expect(new Set([a, b])).toEqual(new Set([0, 1]));
    const queued = s.acquire(never);
    expect(s.waiting).toBe(1);
    await expect(s.acquire(never)).rejects.toBeInstanceOf(QueueFullError);
    s.release(a, 3000);
    expect(await queued).toBe(a);
    // One completion of 3 s, two sequences, nobody waiting: a sequence is free in about 1.5 s.
    expect(s.retryAfterS()).toBe(2);
    expect(s.active).toBe(2);
  });

  it('estimates Retry-After from a running mean of completion times, the queue ahead and the sequences', () => {
    expect(retryAfterEstimate(null, 16, 1)).toBe(1);
    expect(retryAfterEstimate(100, 0, 1)).toBe(1);
    expect(retryAfterEstimate(4000, 0, 1)).toBe(4);
    expect(retryAfterEstimate(4000, 3, 1)).toBe(16);
    expect(retryAfterEstimate(4000, 3, 4)).toBe(4);
    expect(retryAfterEstimate(4000, 100, 1)).toBe(60);
    const s = new Scheduler(1, 0);
    const never = new AbortController().signal;
    const run = async (ms: number) => s.release(await s.acquire(never), ms);
    return (async () => {
      await run(1000);
      expect(s.retryAfterS()).toBe(1);
      // Completions get slow: the estimate follows within a few.
      for (let i = 0; i < 5; i++) await run(10_000);
      expect(s.retryAfterS()).toBeGreaterThanOrEqual(8);
      expect(s.retryAfterS()).toBeLessThanOrEqual(10);
      // And fast again.
      for (let i = 0; i < 12; i++) await run(200);
      expect(s.retryAfterS()).toBe(1);
    })();
  });

  it('drops a waiter whose request is aborted, and counts slots stuck after an abort', async () => {
    const s = new Scheduler(1, 4, 0);
    const slot = await s.acquire(new AbortController().signal);
    const ac = new AbortController();
    const waiting = s.acquire(ac.signal);
    ac.abort(new Error('gone'));
    await expect(waiting).rejects.toThrow('gone');
    expect(s.waiting).toBe(0);
    expect(s.stuck()).toBe(0);
    s.noteAborted(slot);
    expect(s.stuck()).toBe(1);
    s.release(slot);
    expect(s.stuck()).toBe(0);
    const w = s.acquire(new AbortController().signal);
    expect(await w).toBe(slot);
    const pending = s.acquire(new AbortController().signal);
    s.rejectAll(new Error('stopping'));
    await expect(pending).rejects.toThrow('stopping');
  });
});

describe('manifest', () => {
  it('verifies a model, signed and unsigned; refuses a changed model and a bad signature', async () => {
    const model = join(tmp.dir, 'm.gguf');
    await makeModel({ out: model, seed: 1 });
    const key = generateSigningKey();
    const other = generateSigningKey();
    writeFileSync(join(tmp.dir, 'k.pem'), key.privateKey);
    writeFileSync(join(tmp.dir, 'k.pub.pem'), key.publicKey);
    writeFileSync(join(tmp.dir, 'other.pub.pem'), other.publicKey);
    const plain = join(tmp.dir, 'plain.json');
    const signed = join(tmp.dir, 'signed.json');
    await writeManifest(plain, await createManifest([model]));
    await writeManifest(signed, await createManifest([model], join(tmp.dir, 'k.pem')));
    const m = JSON.parse(readFileSync(signed, 'utf8'));
    expect(m.files).toEqual([
      { path: 'm.gguf', sha256: expect.stringMatching(/^[0-9a-f]{64}$/), size: expect.any(Number) },
    ]);
    expect(typeof m.signature).toBe('string');

    expect(await verifyManifest(plain, model)).toMatchObject({ signed: false, signatureChecked: false });
    expect(await verifyManifest(signed, model, join(tmp.dir, 'k.pub.pem'))).toMatchObject({ signatureChecked: true });
    await expect(verifyManifest(signed, model, join(tmp.dir, 'other.pub.pem'))).rejects.toMatchObject({
      kind: 'signature',
    });
    await expect(verifyManifest(plain, model, join(tmp.dir, 'k.pub.pem'))).rejects.toMatchObject({
      kind: 'signature',
    });
    // A tampered manifest no longer matches its signature.
    writeFileSync(join(tmp.dir, 'tampered.json'), JSON.stringify({ ...m, files: [{ ...m.files[0], size: 1 }] }));
    await expect(
      verifyManifest(join(tmp.dir, 'tampered.json'), model, join(tmp.dir, 'k.pub.pem')),
    ).rejects.toBeInstanceOf(ManifestError);
    // Same size, other bytes.
    await makeModel({ out: model, seed: 2 });
    await expect(verifyManifest(plain, model)).rejects.toMatchObject({ kind: 'mismatch' });
  });

  it('keygen and manifest --sign from the command line', async () => {
    const dir = join(tmp.dir, 'keys');
    const k = await cli(['keygen', '--out', dir]);
    expect(k.code).toBe(0);
    expect(statSync(join(dir, 'manifest-key.pem')).mode & 0o777).toBe(0o600);
    const model = join(tmp.dir, 'cli.gguf');
    await makeModel({ out: model });
    const out = join(tmp.dir, 'cli-manifest.json');
    const r = await cli(['manifest', '--model', model, '--out', out, '--sign', join(dir, 'manifest-key.pem')]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ out, signed: true });
    expect(await verifyManifest(out, model, join(dir, 'manifest-key.pub.pem'))).toMatchObject({
      signatureChecked: true,
    });
    expect((await cli(['manifest', '--model', join(tmp.dir, 'none.gguf'), '--out', out])).code).toBe(78);
  });
});

describe('certs', () => {
  it('makes a CA, a server and a client certificate that complete a mutual-TLS handshake; keys 0600', async () => {
    const r = await cli(['certs', '--out', join(tmp.dir, 'pki')]);
    expect(r.code).toBe(0);
    const f = JSON.parse(r.stdout) as Record<string, string>;
    for (const k of ['caKey', 'serverKey', 'clientKey']) expect(statSync(f[k]!).mode & 0o777).toBe(0o600);
    expect((await cli(['certs', '--out', join(tmp.dir, 'pki')])).code).toBe(78);
    const read = (k: string) => readFileSync(f[k]!);
    const server = createServer(
      {
        cert: read('serverCert'),
        key: read('serverKey'),
        ca: read('caCert'),
        requestCert: true,
        rejectUnauthorized: true,
      },
      (req, res) => res.end((req.socket as import('node:tls').TLSSocket).getPeerCertificate().subject.CN),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const addr = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
      for (const servername of ['localhost', undefined]) {
        const ok = await request(addr, {
          path: '/',
          tls: {
            ca: read('caCert'),
            cert: read('clientCert'),
            key: read('clientKey'),
            ...(servername ? { servername } : {}),
          },
        });
        expect(ok).toMatchObject({ status: 200, text: 'vigil-client' });
      }
      await expect(request(addr, { path: '/', tls: { ca: read('caCert') } })).rejects.toThrow();
    } finally {
      server.close();
    }
  });
});

// certs via the library too (the CLI's errors are 78 for existing files, checked above)
it('generateCerts refuses to overwrite without force', async () => {
  const dir = join(tmp.dir, 'pki2');
  await generateCerts({ out: dir, days: 1 });
  await expect(generateCerts({ out: dir })).rejects.toThrow(/--force/);
});

describe('mTLS refusal log', () => {
  it('logs the first refusal of an episode at once, counts the rest, reports the count when the window ends', async () => {
    const records: Record<string, unknown>[] = [];
    const log = refusalLog(memoryLogger(records), 80, 2);
    log.note('10.0.0.1', 'no client certificate');
    for (let i = 0; i < 4; i++) log.note('10.0.0.1', 'no client certificate');
    log.note('10.0.0.2', 'client certificate expired');
    // The table is full: a third client shares the per-reason episode.
    log.note('10.0.0.3', 'client certificate expired');
    log.note('10.0.0.4', 'client certificate expired');
    expect(records.map((r) => [r.level, r.msg, r.remote])).toEqual([
      ['warn', 'mTLS handshake refused', '10.0.0.1'],
      ['warn', 'mTLS handshake refused', '10.0.0.2'],
      ['warn', 'mTLS handshake refused', null],
    ]);
    await new Promise((r) => setTimeout(r, 200));
    expect(records.slice(3)).toEqual([
      expect.objectContaining({ msg: 'mTLS handshakes refused', remote: '10.0.0.1', count: 4 }),
      expect.objectContaining({ msg: 'mTLS handshakes refused', remote: null, count: 1 }),
    ]);
    // The episode is over: the next refusal is logged at once again.
    await new Promise((r) => setTimeout(r, 200));
    log.note('10.0.0.1', 'no client certificate');
    expect(records.at(-1)).toMatchObject({ msg: 'mTLS handshake refused', remote: '10.0.0.1' });
    log.note('10.0.0.1', 'no client certificate');
    log.flush();
    expect(records.at(-1)).toMatchObject({ msg: 'mTLS handshakes refused', count: 1 });
  });

  it('names the reason of Node errors', () => {
    expect(refusalReason({ code: 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE' }, null)).toBe('no client certificate');
    expect(refusalReason({ code: 'ECONNRESET' }, 'CERT_HAS_EXPIRED')).toBe('client certificate expired');
    expect(refusalReason({ code: 'ECONNRESET' }, 'CERT_NOT_YET_VALID')).toBe('client certificate not yet valid');
    expect(refusalReason({ code: 'ECONNRESET' }, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE')).toContain('unknown CA');
    expect(refusalReason({ code: 'ECONNRESET' }, null)).toBeNull();
  });
});

/**
 * The probes against the fault server, a real process: what a success is, how each failure is
 * classified, what the request looks like, and that the budget bounds every probe.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Prober, readHealth } from '../src/probe.js';
import { type FaultServer, freePort, startFault, tmpDir } from './helpers.js';

const tmp = tmpDir();
let server: FaultServer;
const prober = new Prober({ budgetMs: 500, prompt: 'ping', canaryPrompt: 'Say hello.', canaryMaxTokens: 16 });
const target = () => ({ http: { host: '127.0.0.1', port: server.port }, model: 'tiny' });

beforeAll(async () => {
  server = await startFault(tmp.dir);
});
afterAll(async () => {
  prober.close();
  await server.stop();
  tmp.cleanup();
});

describe('the liveness probe', () => {
  it('posts the spec 2.4 request and succeeds on a reply that contains "content"', async () => {
    server.setMode('ok');
    const before = server.received().length;
    const r = await prober.probe('chat', target());
    expect(r).toMatchObject({ ok: true });
    expect(r.ms).toBeGreaterThan(0);
    expect(r.endedAt).toBeGreaterThanOrEqual(r.startedAt);
    const req = server.received().slice(before);
    expect(req).toHaveLength(1);
    expect(req[0]).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    expect(JSON.parse(req[0]!.body)).toEqual({
      model: 'tiny',
      messages: [{ role: 'user', content: 'ping' }],
      max_tokens: 2,
      temperature: 0,
    });
  });

  it.each([
    ['hang', 'timeout', /^no complete reply within the 0\.5 s budget$/],
    ['slow:900', 'timeout', /budget/],
    ['empty', 'empty_reply', /^HTTP 200 with an empty body$/],
    ['500', 'http_error', /^HTTP 500: \{"error":\{"message":"model crashed"/],
    ['no_content', 'no_content', /^\{"ok":true\}$/],
    ['reset', 'reset', /ECONNRESET|socket hang up/],
  ])('classifies %s as %s', async (mode, cause, snippet) => {
    server.setMode(mode);
    const r = await prober.probe('chat', target());
    expect(r).toMatchObject({ ok: false, cause });
    expect(r.snippet).toMatch(snippet);
    // Every probe is bounded by its budget: a hanging server does not hold it (generous bound).
    expect(r.ms).toBeLessThan(5000);
    if (cause === 'timeout') expect(r.ms).toBeGreaterThanOrEqual(480);
  });

  it('succeeds on a reply slower than usual but within the budget', async () => {
    server.setMode('slow:150');
    const r = await prober.probe('chat', target());
    expect(r.ok).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(140);
  });

  it('classifies a closed port as refused', async () => {
    const r = await prober.probe('chat', { http: { host: '127.0.0.1', port: await freePort() }, model: 'tiny' });
    expect(r).toMatchObject({ ok: false, cause: 'refused' });
    expect(r.snippet).toContain('ECONNREFUSED');
  });
});

describe('the model-list probe and the canary', () => {
  it('answers the model list while chat completions hang (spec 3.4)', async () => {
    server.setMode('hang');
    expect(await prober.probe('models', target())).toMatchObject({ ok: true });
    expect(await prober.probe('chat', target())).toMatchObject({ ok: false, cause: 'timeout' });
  });

  it('fails the model list on an error status', async () => {
    server.setMode('models_500');
    expect(await prober.probe('models', target())).toMatchObject({ ok: false, cause: 'http_error' });
  });

  it('wants real text from the canary: a blank content passes the probe but not the canary', async () => {
    server.setMode('blank');
    expect(await prober.probe('chat', target())).toMatchObject({ ok: true });
    expect(await prober.probe('canary', target())).toMatchObject({ ok: false, cause: 'no_content' });
    server.setMode('ok');
    const before = server.received().length;
    expect(await prober.probe('canary', target())).toMatchObject({ ok: true });
    expect(JSON.parse(server.received()[before]!.body)).toEqual({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: 16,
      temperature: 0,
    });
  });
});

describe('the busy check: what /health says about progress (issue 30)', () => {
  const P = (p: object) => JSON.stringify({ status: 'ok', progress: p });
  it.each([
    ['work in flight, no stall', 200, P({ in_flight: 2, stalled: 0 }), 'progressing'],
    ['nothing in flight', 200, P({ in_flight: 0, stalled: 0 }), 'idle'],
    ['a stalled slot (503)', 503, JSON.stringify({ status: 'stalled', reason: 'slot 0 …', progress: {} }), 'stalled'],
    ['a stalled count in a 200 (defensive)', 200, P({ in_flight: 1, stalled: 1 }), 'stalled'],
    ['loading (503)', 503, JSON.stringify({ status: 'loading' }), 'not_serving'],
    ['a 503 that is not JSON', 503, 'Service Unavailable', 'not_serving'],
    ['a 200 without progress (another server)', 200, JSON.stringify({ status: 'ok' }), 'unreported'],
    ['no /health at all (404)', 404, 'not found', 'unreported'],
    ['a 200 that is not JSON', 200, 'OK', 'unreported'],
  ])('%s → %s', (_what, status, body, expected) => {
    expect(readHealth(status as number, body as string).busy).toBe(expected);
  });

  it.each([
    ['waiting for CPU', JSON.stringify({ status: 'ok', progress: { in_flight: 1, waiting_for_cpu: true } }), true],
    ['not waiting', JSON.stringify({ status: 'ok', progress: { in_flight: 1, waiting_for_cpu: false } }), false],
    ['a server without the field', JSON.stringify({ status: 'ok', progress: { in_flight: 1 } }), false],
    ['"true" as a string is not true', JSON.stringify({ progress: { waiting_for_cpu: 'true' } }), false],
    ['not JSON', 'OK', false],
    ['JSON null', 'null', false],
  ])('/health %s → waiting for CPU: %s', (_what, body, expected) => {
    expect(readHealth(200, body).waitingForCpu).toBe(expected);
  });

  it('only a 200 says the model waits for CPU', () => {
    const body = JSON.stringify({ status: 'stalled', progress: { in_flight: 1, waiting_for_cpu: true } });
    expect(readHealth(503, body)).toEqual({ busy: 'stalled', waitingForCpu: false });
    expect(readHealth(200, body).waitingForCpu).toBe(true);
  });

  it('a completion that times out while /health says the model waits for CPU: waitingCpu; a plain hang: not', async () => {
    server.setMode('waiting_cpu');
    const r = await prober.probe('chat', target());
    expect(r).toMatchObject({ ok: false, cause: 'timeout', waitingCpu: true });
    const canary = await prober.probe('canary', target());
    expect(canary).toMatchObject({ ok: false, cause: 'timeout', waitingCpu: true });
    server.setMode('hang');
    const hang = await prober.probe('chat', target());
    expect(hang).toMatchObject({ ok: false, cause: 'timeout' });
    expect(hang.waitingCpu).toBeUndefined();
    server.setMode('ok');
  });

  it('asks /health and reports an answer; a server that does not answer is no_answer to the machine', async () => {
    const r = await prober.probe('busy', target());
    expect(r.ok).toBe(true);
    expect(r.busy).toEqual(expect.stringMatching(/^(progressing|idle|stalled|not_serving|unreported)$/));
    const refused = await prober.probe('busy', { http: { host: '127.0.0.1', port: await freePort() }, model: 'tiny' });
    expect(refused).toMatchObject({ ok: false, cause: 'refused' });
    expect(refused.busy).toBeUndefined();
  });
});

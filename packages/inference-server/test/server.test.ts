/**
 * The server as a real process on the generated tiny model, driven by the official `openai`
 * client and by raw HTTP: completions, streams, aborts, errors, the queue, timeouts, /v1/models
 * during generation, and the access log.
 */
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import OpenAI from 'openai';
import {
  BIG_CONTEXT,
  chat,
  errorBody,
  LONG,
  lastEventBeforeDone,
  readLines,
  request,
  SseCompletion,
  serveTiny,
  sharedServer,
  tinyModel,
} from './helpers.js';

const { dir, model: MODEL } = tinyModel();

describe('the server (parallel 2)', () => {
  const accessLog = join(dir, 'access.log');
  let firstHealth: { status: number; body: unknown };
  const s = sharedServer(async () => {
    const started = await serveTiny(MODEL, ['--model-id', 'tiny-alias', ...BIG_CONTEXT, '--access-log', accessLog]);
    // Right after it listens the model is still loading: /health says so, /v1/models answers.
    const h = await request(started.http!, { path: '/health' });
    firstHealth = { status: h.status, body: h.json() };
    return started;
  });

  it('answers /health with 503 while loading, then 200', async () => {
    expect(firstHealth).toEqual({ status: 503, body: { status: 'loading' } });
    const h = await request(s.http, { path: '/health' });
    expect({ status: h.status, body: h.json() }).toEqual({
      status: 200,
      body: {
        status: 'ok',
        progress: {
          in_flight: 0,
          oldest_age_s: 0,
          since_progress_s: null,
          stalled: 0,
          reason: null,
          waiting_for_cpu: false,
        },
      },
    });
  });

  it('lists the configured models', async () => {
    const list = await s.openai.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['tiny', 'tiny-alias']);
    expect(list.data[0]).toMatchObject({ object: 'model', owned_by: 'vigil', created: expect.any(Number) });
    const one = await s.openai.models.retrieve('tiny-alias');
    expect(one.id).toBe('tiny-alias');
  });

  it('completes without streaming (openai client): content, finish_reason, usage; deterministic at temperature 0', async () => {
    const req = {
      model: 'tiny',
      messages: [
        { role: 'system' as const, content: 'You are terse.' },
        { role: 'user' as const, content: 'ping' },
      ],
      max_tokens: 10,
      temperature: 0,
    };
    const a = await s.openai.chat.completions.create(req);
    expect(a.object).toBe('chat.completion');
    expect(a.model).toBe('tiny');
    expect(a.id).toMatch(/^chatcmpl-/);
    expect(a.choices).toHaveLength(1);
    expect(a.choices[0]!.message.role).toBe('assistant');
    expect(typeof a.choices[0]!.message.content).toBe('string');
    expect(a.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(a.choices[0]!.finish_reason).toBe('length');
    expect(a.usage).toEqual({
      prompt_tokens: expect.any(Number),
      completion_tokens: 10,
      total_tokens: a.usage!.prompt_tokens + 10,
      prompt_tokens_details: { cached_tokens: expect.any(Number) },
    });
    expect(a.usage!.prompt_tokens).toBeGreaterThan(5);
    const b = await s.openai.chat.completions.create({ ...req, model: 'tiny-alias' });
    expect(b.choices[0]!.message.content).toBe(a.choices[0]!.message.content);
    expect(b.model).toBe('tiny-alias');
    // The same prompt again: its slot holds all of it (the last token is evaluated again).
    expect(b.usage!.prompt_tokens_details!.cached_tokens).toBe(b.usage!.prompt_tokens - 1);
  });

  it('samples with a fresh seed when the request has none; a given seed reproduces its text', async () => {
    const ask = (seed?: number) =>
      s.openai.chat.completions.create(
        chat('tell me', { max_tokens: 24, temperature: 1.5, ...(seed === undefined ? {} : { seed }) }),
      );
    // Two at once (the same second): different samples.
    const [a, b] = await Promise.all([ask(), ask()]);
    expect(a.choices[0]!.message.content).not.toBe(b.choices[0]!.message.content);
    const [c, d] = await Promise.all([ask(1234), ask(1234)]);
    expect(c.choices[0]!.message.content).toBe(d.choices[0]!.message.content);
    expect((await ask(1234)).choices[0]!.message.content).toBe(c.choices[0]!.message.content);
  });

  it('answers the guardian probe (max_tokens 2, temperature 0) with a "content" key', async () => {
    const r = await request(s.http, { body: chat('ping', { max_tokens: 2, temperature: 0 }) });
    expect(r.status).toBe(200);
    expect(r.text).toContain('"content"');
  });

  it('ends at a stop sequence with finish_reason "stop"', async () => {
    const req = chat('hello', { temperature: 0 });
    const full = (await s.openai.chat.completions.create({ ...req, max_tokens: 40 })).choices[0]!.message.content!;
    expect(full.length).toBeGreaterThan(12);
    const stop = full.slice(8, 11);
    const cut = await s.openai.chat.completions.create({ ...req, max_tokens: 40, stop: [stop] });
    expect(cut.choices[0]!.finish_reason).toBe('stop');
    expect(full.startsWith(cut.choices[0]!.message.content!)).toBe(true);
    expect(cut.choices[0]!.message.content!).not.toContain(stop);
  });

  it('streams chat.completion.chunk events and [DONE], with usage when asked (openai client)', async () => {
    const req = chat('hello', { max_tokens: 12, temperature: 0 });
    const stream = await s.openai.chat.completions.create({
      ...req,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: unknown = null;
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      expect(c.object).toBe('chat.completion.chunk');
      text += c.choices[0]?.delta?.content ?? '';
      finish = c.choices[0]?.finish_reason ?? finish;
      if (c.usage) usage = c.usage;
    }
    expect(chunks).toBeGreaterThan(3);
    expect(text.length).toBeGreaterThan(0);
    expect(finish).toBe('length');
    expect(usage).toMatchObject({ completion_tokens: 12 });
    // The same request without streaming gives the same text.
    const plain = await s.openai.chat.completions.create(req);
    expect(plain.choices[0]!.message.content).toBe(text);
  });

  it('raw SSE: role first, content deltas, a final chunk with finish_reason, then data: [DONE]', async () => {
    const sse = await SseCompletion.open(s.http, chat('hi', { max_tokens: 4 }));
    await sse.waitEnd();
    expect(sse.status).toBe(200);
    expect(sse.events[sse.events.length - 1]).toBe('[DONE]');
    const chunks = sse.events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks[chunks.length - 1].choices[0]).toEqual({ index: 0, delta: {}, finish_reason: 'length' });
  });

  it('answers a bad model with 404 model_not_found (openai client)', async () => {
    const err = await s.openai.chat.completions
      .create({ model: 'no-such-model', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
  });

  it('answers bad requests with OpenAI-shaped errors', async () => {
    const badJson = await request(s.http, { body: '{"model":' });
    expect(badJson.status).toBe(400);
    expect(badJson.json()).toEqual(errorBody('invalid_request_error', 'invalid_json', expect.stringContaining('JSON')));
    const badField = await request(s.http, {
      body: chat('x', { temperature: 9 }),
    });
    expect(badField.status).toBe(400);
    expect(badField.json().error).toMatchObject({ type: 'invalid_request_error', param: 'temperature' });
    const unknown = await request(s.http, { path: '/v1/audio/speech', body: {} });
    expect(unknown.status).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: 'unknown_url' });
    const wrongMethod = await request(s.http, { method: 'GET' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.allow).toBe('POST');
    const rebinding = await request(s.http, { path: '/v1/models', headers: { host: 'evil.example:1337' } });
    expect(rebinding.status).toBe(421);
    expect(rebinding.json().error).toMatchObject({ code: 'misdirected' });
    const loopbackName = await request(s.http, { path: '/v1/models', headers: { host: 'LocalHost:1337' } });
    expect(loopbackName.status).toBe(200);
  });

  it('answers /v1/models while the model is busy generating', async () => {
    const sse = await SseCompletion.open(s.http, LONG);
    try {
      await sse.waitFor(5);
      for (let i = 0; i < 20; i++) {
        const r = await request(s.http, { path: '/v1/models' });
        expect(r.status).toBe(200);
        expect(r.json().data[0].id).toBe('tiny');
      }
      const before = sse.events.length;
      await sse.waitFor(before + 5);
      expect(sse.ended).toBe(false);
    } finally {
      sse.close();
    }
  });

  it('writes one access-log line per request; only successful completions say "request completed"', async () => {
    await new Promise((r) => setTimeout(r, 300));
    const lines = readLines(accessLog);
    const completed = lines.filter((l) => JSON.stringify(l).includes('request completed'));
    expect(completed.length).toBeGreaterThanOrEqual(6);
    for (const l of completed) {
      expect(l).toMatchObject({
        msg: 'request completed',
        method: 'POST',
        path: '/v1/chat/completions',
        status: 200,
        duration_ms: expect.any(Number),
        prompt_tokens: expect.any(Number),
        completion_tokens: expect.any(Number),
        tokens: expect.any(Number),
      });
    }
    const others = lines.filter((l) => l.msg !== 'request completed');
    expect(others.some((l) => l.path === '/v1/models' && l.status === 200)).toBe(true);
    expect(others.some((l) => l.status === 404 && l.error === 'model_not_found')).toBe(true);
    // The long stream closed by its client: 499, with the tokens it had generated.
    const left = others.find((l) => l.status === 499);
    expect(left).toMatchObject({ msg: 'request failed', error: 'client_closed' });
    expect(left!.completion_tokens).toBeGreaterThan(0);
  });
});

describe('the queue (parallel 1, max-queue 1)', () => {
  const s = sharedServer(() => serveTiny(MODEL, ['--parallel', '1', '--max-queue', '1', ...BIG_CONTEXT]));

  it('queues one request, refuses the next with 429 and Retry-After, and an aborted stream frees its sequence', async () => {
    // The openai client's stream, aborted mid-way by its AbortController.
    const ac = new AbortController();
    const stream = await s.openai.chat.completions.create({ ...LONG, stream: true } as never, { signal: ac.signal });
    const it = (stream as unknown as AsyncIterable<OpenAI.Chat.Completions.ChatCompletionChunk>)[
      Symbol.asyncIterator
    ]();
    for (let i = 0; i < 3; i++) await it.next();
    // The one sequence is busy: this one waits...
    const queued = request(s.http, { body: chat('q', { max_tokens: 3 }) });
    await new Promise((r) => setTimeout(r, 200));
    // ...and this one finds the queue full.
    const full = await request(s.http, { body: chat('x', { max_tokens: 3 }) });
    expect(full.status).toBe(429);
    expect(Number(full.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(full.json()).toEqual(errorBody('rate_limit_exceeded', 'rate_limit_exceeded'));
    // The client goes away: its generation stops and the waiting request gets the sequence.
    ac.abort();
    await it.return?.();
    const done = await queued;
    expect(done.status).toBe(200);
    expect(done.json().usage.completion_tokens).toBe(3);
    // And the sequence is free again for the next one.
    const again = await s.openai.chat.completions.create(chat('again', { max_tokens: 2 }));
    expect(again.choices[0]!.message.content!.length).toBeGreaterThan(0);
  });

  it('refuses with 429 through the openai client as a RateLimitError', async () => {
    const a = await SseCompletion.open(s.http, LONG);
    // A queued stream gets its headers only when a sequence is free: not awaited here.
    const b = SseCompletion.open(s.http, { ...LONG, max_tokens: 5 }).catch(() => null);
    try {
      await a.waitFor(3);
      await new Promise((r) => setTimeout(r, 200));
      const err = await s.openai.chat.completions.create(chat('x', { max_tokens: 2 })).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    } finally {
      a.close();
      (await b)?.close();
    }
  });

  it("answers a full queue's Retry-After from the time completions take: it grows when they get slow", async () => {
    const short = chat('q', { max_tokens: 2 });
    /** Fills the one sequence and the queue of one; the next request's answer. */
    const refused = async () => {
      const a = await SseCompletion.open(s.http, LONG);
      await a.waitFor(3);
      const queued = request(s.http, { body: short });
      await new Promise((r) => setTimeout(r, 200));
      const full = await request(s.http, { body: short });
      a.close();
      expect((await queued).status).toBe(200);
      return { status: full.status, retryAfter: Number(full.headers['retry-after']) };
    };
    for (let i = 0; i < 3; i++) expect((await request(s.http, { body: short })).status).toBe(200);
    const fast = await refused();
    // Three completions of 4,000 tokens (seconds each on the tiny model; 2,500 took 2.0 s once the
    // plain path's steps went straight to the model).
    const started = Date.now();
    for (let i = 0; i < 3; i++) {
      expect((await request(s.http, { body: { ...short, max_tokens: 4000 } })).status).toBe(200);
    }
    const slowS = (Date.now() - started) / 3 / 1000;
    expect(slowS).toBeGreaterThan(2); // else the test proves nothing on this host
    const slow = await refused();
    expect(fast).toEqual({ status: 429, retryAfter: 1 });
    expect(slow.status).toBe(429);
    // The request refused would wait for the queued one and then its own turn: about two slow
    // completions; at least one, however the running mean has caught up.
    expect(slow.retryAfter).toBeGreaterThanOrEqual(Math.floor(slowS));
    expect(slow.retryAfter).toBeLessThanOrEqual(Math.ceil(2 * slowS) + 1);
  }, 150_000);
});

describe('request timeout', () => {
  const s = sharedServer(() => serveTiny(MODEL, [...BIG_CONTEXT, '--request-timeout', '0.5']));

  it('ends a completion that runs too long with a 504 OpenAI error, never an empty reply', async () => {
    const r = await request(s.http, { body: LONG });
    expect(r.status).toBe(504);
    expect(r.json()).toEqual(errorBody('timeout', 'request_timeout', expect.stringContaining('--request-timeout')));
  });

  it('ends a stream that runs too long with an error event and [DONE]', async () => {
    const sse = await SseCompletion.open(s.http, LONG);
    expect(await lastEventBeforeDone(sse)).toMatchObject({ error: { type: 'timeout', code: 'request_timeout' } });
    expect(sse.status).toBe(200);
    // The server is still serving afterwards.
    const ok = await request(s.http, { body: chat('x', { max_tokens: 2 }) });
    expect(ok.status).toBe(200);
  });
});

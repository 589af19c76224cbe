/**
 * What every generating route shares since the protocols moved onto the one pipeline: the
 * prefix-based slot choice with cached tokens in each protocol's usage (Responses, Anthropic
 * Messages, legacy completions; chat's in prefix.test.ts), the input limits on the new routes'
 * own fields (Messages' stop_sequences and tools' input_schema, Responses' text.format schema and
 * tools) answered in the route's shape, and the last-resort 500 in Anthropic's shape on
 * /v1/messages. The server as a real process on the generated tiny model, official clients.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { ServerContext } from '../src/context.js';
import { memoryLogger } from '../src/index.js';
import { createHandler } from '../src/routes.js';
import { readLines, request, serveTiny, sharedServer, tinyModel, url } from './helpers.js';

const { dir, model: MODEL } = tinyModel();
const LOG = `${dir}/access-protocol-reuse.log`;
// One slot: a repeated prompt finds its prefix there; no saved states to blur the counts.
const s = sharedServer(() =>
  serveTiny(MODEL, ['--parallel', '1', '--state-cache-mib', '0', '--threads', '1', '--access-log', LOG]),
);

/** Sixty of the tiny model's words, different for each `seed`: a prompt no other test sends. */
function words(seed: number, n = 60): string {
  const vocab = 'the river stone cloud green blue house tree open close start stop good new old great little'.split(
    ' ',
  );
  return Array.from({ length: n }, (_, i) => vocab[(seed * 7 + i * 13 + ((i * i) % 5)) % vocab.length]).join(' ');
}

/** The access log's lines that `match`, once there are `n` of them (20 s at most). */
async function logLines(match: (l: Record<string, any>) => boolean, n: number): Promise<Record<string, any>[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const lines = readLines(LOG).filter(match);
    if (lines.length >= n || Date.now() > deadline) return lines;
    await new Promise((r) => setTimeout(r, 20));
  }
}

const post = (path: string, body: unknown) =>
  request(s.http, { path, body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

/** A chain of `depth` definitions, each an anyOf of two $refs to the one below: 2^depth alternatives. */
function duplicateRefs(depth: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { d0: { type: 'string' } };
  for (let i = 1; i <= depth; i++)
    defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
  return { $defs: defs, type: 'object', properties: { a: { $ref: `#/$defs/d${depth}` } }, required: ['a'] };
}

describe('cached tokens on every generating route', () => {
  it('/v1/responses reports input_tokens_details.cached_tokens on a repeated prompt', async () => {
    const ask = () => s.openai.responses.create({ model: 'tiny', input: words(1), max_output_tokens: 4 });
    const first = await ask();
    expect(first.usage!.input_tokens_details.cached_tokens).toBeLessThan(first.usage!.input_tokens / 10);
    const again = await ask();
    expect(again.usage!.input_tokens).toBe(first.usage!.input_tokens);
    // All but the last prompt token (which the model must evaluate to predict the next).
    expect(again.usage!.input_tokens_details.cached_tokens).toBe(again.usage!.input_tokens - 1);
    // The access log is written after the reply: wait for the second line.
    const lines = await logLines((l) => l.path === '/v1/responses' && l.msg === 'request completed', 2);
    expect(lines.map((l) => l.cached_tokens)).toEqual([
      first.usage!.input_tokens_details.cached_tokens,
      again.usage!.input_tokens - 1,
    ]);
  });

  it('/v1/messages reports cache_read_input_tokens apart from input_tokens, as Anthropic does', async () => {
    const client = new Anthropic({ baseURL: url(s.http), apiKey: 'unused', maxRetries: 0 });
    const params = { model: 'tiny', messages: [{ role: 'user' as const, content: words(2) }] };
    const prompt = (await client.messages.countTokens(params)).input_tokens;
    const first = await client.messages.create({ ...params, max_tokens: 4 });
    expect(first.usage.input_tokens + (first.usage.cache_read_input_tokens ?? 0)).toBe(prompt);
    expect(first.usage.cache_read_input_tokens).toBeLessThan(prompt / 10);
    const again = await client.messages.create({ ...params, max_tokens: 4 });
    expect(again.usage.cache_read_input_tokens).toBe(prompt - 1);
    expect(again.usage.input_tokens).toBe(1);
    expect(again.usage.cache_creation_input_tokens).toBe(0);
    // Streamed, message_delta's usage says the same.
    const stream = client.messages.stream({ ...params, max_tokens: 4 });
    const final = await stream.finalMessage();
    expect(final.usage.cache_read_input_tokens).toBe(prompt - 1);
  });

  it('/v1/completions (a raw prompt) reuses its prefix too, reported as chat reports it', async () => {
    const ask = () => s.openai.completions.create({ model: 'tiny', prompt: words(3), max_tokens: 4 });
    const first = await ask();
    expect(first.usage!.prompt_tokens_details?.cached_tokens).toBeLessThan(first.usage!.prompt_tokens / 10);
    const again = await ask();
    expect(again.usage!.prompt_tokens).toBe(first.usage!.prompt_tokens);
    expect(again.usage!.prompt_tokens_details?.cached_tokens).toBe(again.usage!.prompt_tokens - 1);
    // With temperature 0 the text is the same whether the prefix was cached or not.
    const cold = { model: 'tiny', prompt: words(3), max_tokens: 6, temperature: 0 };
    await s.openai.completions.create({ ...cold, prompt: words(4) });
    const a = await s.openai.completions.create(cold);
    const b = await s.openai.completions.create(cold);
    expect(b.usage!.prompt_tokens_details?.cached_tokens).toBe(b.usage!.prompt_tokens - 1);
    expect(b.choices[0]!.text).toBe(a.choices[0]!.text);
  });
});

describe('input limits on the new routes, in their own shape', () => {
  it('/v1/messages: a stop sequence over the limit is a 400 in Anthropic shape naming stop_sequences', async () => {
    const r = await post('/v1/messages', {
      model: 'tiny',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
      stop_sequences: ['x'.repeat(1025)],
    });
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: expect.stringContaining("Invalid 'stop_sequences'") },
    });
    expect(r.json().error.message).toContain('at most 1024 bytes');
    // Together over 2,048 bytes, each within its own limit.
    const many = await post('/v1/messages', {
      model: 'tiny',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
      stop_sequences: ['a', 'b', 'c'].map((c) => c.repeat(1000)),
    });
    expect(many.status).toBe(400);
    expect(many.json().error.message).toContain('together');
  });

  it('/v1/messages: a tool input_schema too complex, and too many tools, are 400 in Anthropic shape', async () => {
    const schema = await post('/v1/messages', {
      model: 'tiny',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
      tools: [{ name: 'f', input_schema: duplicateRefs(40) }],
    });
    expect(schema.status).toBe(400);
    expect(schema.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(schema.json().error.message).toContain('schema too complex');
    const tools = Array.from({ length: 129 }, (_, i) => ({ name: `f${i}`, input_schema: { type: 'object' } }));
    const many = await post('/v1/messages', {
      model: 'tiny',
      max_tokens: 4,
      messages: [{ role: 'user', content: 'hi' }],
      tools,
    });
    expect(many.status).toBe(400);
    expect(many.json().error.message).toContain("Invalid 'tools': array too long");
  });

  it('/v1/responses: a text.format schema too complex is a 400 schema_too_complex naming text.format.schema', async () => {
    const r = await post('/v1/responses', {
      model: 'tiny',
      input: 'hi',
      max_output_tokens: 4,
      text: { format: { type: 'json_schema', name: 'x', schema: duplicateRefs(40) } },
    });
    expect(r.status).toBe(400);
    expect(r.json()).toEqual({
      error: {
        type: 'invalid_request_error',
        code: 'schema_too_complex',
        param: 'text.format.schema',
        message: expect.stringContaining('schema too complex'),
      },
    });
    const big = await post('/v1/responses', {
      model: 'tiny',
      input: 'hi',
      tools: [
        {
          type: 'namespace',
          name: 'ns',
          tools: [{ type: 'function', name: 'f', parameters: duplicateRefs(40) }],
        },
      ],
    });
    expect(big.status).toBe(400);
    expect(big.json().error).toMatchObject({ code: 'schema_too_complex', param: 'tools[0].tools[0].parameters' });
  });
});

describe('the last resort on every route', () => {
  let server: Server | undefined;
  afterAll(() => {
    server?.close();
  });

  it('answers 500 in Anthropic shape on /v1/messages for a request whose handling throws, and serves the next', async () => {
    const records: Record<string, unknown>[] = [];
    let broken = true;
    const ctx = {
      config: { modelIds: ['tiny'], createdAt: 0, http: null, allowOrigins: [], apiKey: null, maxN: 4 },
      logger: memoryLogger(records),
      responses: { open: 0 },
      access: () => {},
      state: () => {
        if (broken) throw new TypeError('a bug in one request');
        return 'stopping';
      },
    } as unknown as ServerContext;
    server = createServer(createHandler(ctx, 'http'));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const addr = { host: '127.0.0.1', port: (server.address() as AddressInfo).port };
    const send = () =>
      request(addr, { path: '/v1/messages', body: '{}', headers: { 'content-type': 'application/json' } });
    const r = await send();
    expect(r.status).toBe(500);
    expect(r.json()).toEqual({ type: 'error', error: { type: 'api_error', message: expect.any(String) } });
    expect(records.filter((l) => l.level === 'error')).toHaveLength(1);
    broken = false;
    const next = await send();
    expect(next.status).toBe(503);
    expect(next.json()).toMatchObject({ type: 'error' });
  });
});

/**
 * POST /v1/messages and /v1/messages/count_tokens through the official `@anthropic-ai/sdk`,
 * against the server as a real process on the generated tiny model with --api-key-file (one
 * server for the file): messages.create and messages.stream, a forced tool_use whose input
 * matches its schema, a tool_result round trip, what Claude Code sends, the key as x-api-key,
 * and errors in Anthropic's shape naming the field.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { request, serveTiny, sharedServer, tinyModel, url, validate } from './helpers.js';

const { dir, model: MODEL } = tinyModel();
const KEY = 'sk-vigil-anthropic-0123456789';
const keyFile = join(dir, 'api-key');
const s = sharedServer(() => {
  writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  return serveTiny(MODEL, ['--context-size', '2048', '--threads', '1', '--api-key-file', keyFile]);
}, KEY);

let client: Anthropic;
beforeAll(() => {
  client = new Anthropic({ baseURL: url(s.http), apiKey: KEY, maxRetries: 0 });
});

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer' } },
  required: ['city', 'days'],
  additionalProperties: false,
} as const;
const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'The forecast.', input_schema: WEATHER as never }];
const post = (body: object | string, headers: Record<string, string> = {}, path = '/v1/messages') =>
  request(s.http, { path, body, headers: { 'content-type': 'application/json', 'x-api-key': KEY, ...headers } });

describe('POST /v1/messages', () => {
  it('answers messages.create with a text block, stop_reason and usage', async () => {
    const m = await client.messages.create({
      model: 'tiny',
      max_tokens: 8,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Say hello.' }],
    });
    expect(m).toMatchObject({ type: 'message', role: 'assistant', model: 'tiny', stop_reason: 'max_tokens' });
    expect(m.id).toMatch(/^msg_/);
    expect(m.content[0]?.type).toBe('text');
    expect(m.usage.output_tokens).toBe(8);
    expect(m.usage.input_tokens).toBeGreaterThan(0);
  });

  it('streams with messages.stream: the events in order, and the deltas make the final message', async () => {
    const stream = client.messages.stream({
      model: 'tiny',
      max_tokens: 6,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }],
    });
    const types: string[] = [];
    let text = '';
    stream.on('streamEvent', (e) => types.push(e.type));
    stream.on('text', (t) => {
      text += t;
    });
    const m = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
    expect(types).toContain('content_block_delta');
    expect(m.stop_reason).toBe('max_tokens');
    expect(m.usage.output_tokens).toBe(6);
    expect(m.content).toMatchObject([{ type: 'text', text }]);
  });

  it('answers tool_choice any with a tool_use block whose input matches the schema; takes the tool_result back', async () => {
    const ask: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
    const first = await client.messages.create({
      model: 'tiny',
      max_tokens: 200,
      messages: ask,
      tools,
      tool_choice: { type: 'any' },
    });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b) => b.type === 'tool_use');
    if (use?.type !== 'tool_use') throw new Error(`no tool_use in ${JSON.stringify(first.content)}`);
    expect(use.name).toBe('get_weather');
    expect(use.id).toMatch(/^toolu_/);
    expect(validate(WEATHER, use.input)).toEqual([]);

    const second = await client.messages.create({
      model: 'tiny',
      max_tokens: 8,
      tools,
      tool_choice: { type: 'none' },
      messages: [
        ...ask,
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 degrees.' }] },
      ],
    });
    expect(second.content[0]?.type).toBe('text');
    expect(second.stop_reason).toBe('max_tokens');
    const alone = await client.messages.countTokens({ model: 'tiny', messages: ask });
    // The prompt is what was evaluated plus what a reused prefix spared (Anthropic counts them apart).
    const prompt = (u: Anthropic.Usage) => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    expect(prompt(second.usage)).toBeGreaterThan(alone.input_tokens + 5);
  });

  it('accepts what Claude Code sends (a query string, betas, thinking, cache_control, max_tokens past the context)', async () => {
    const r = await post(
      {
        model: 'tiny',
        max_tokens: 32000,
        stream: true,
        system: [{ type: 'text', text: 'You are a coding agent.', cache_control: { type: 'ephemeral' } }],
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
          { role: 'system', content: 'A reminder in the middle of the conversation.' },
        ],
        // Keywords the grammar cannot enforce (minimum, format uri, pattern) in a tool that is not strict.
        tools: [
          {
            name: 'Read',
            description: 'Reads a file.',
            input_schema: {
              type: 'object',
              properties: {
                offset: { type: 'integer', minimum: 0 },
                url: { type: 'string', format: 'uri', pattern: '^https?://' },
                extra: {},
              },
              required: ['offset'],
            },
          },
        ],
        thinking: { type: 'adaptive' },
        context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
        output_config: { effort: 'high' },
        metadata: { user_id: 'u' },
        temperature: 1,
        top_k: 40,
      },
      { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219,interleaved-thinking-2025-05-14' },
      '/v1/messages?beta=true',
    );
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(r.text).toContain('event: message_stop');
    // A strict tool keeps its schema as it is: what the grammar cannot enforce is a 400 naming it.
    const strict = await post({
      model: 'tiny',
      max_tokens: 1,
      messages: [{ role: 'user', content: 'x' }],
      tools: [
        {
          name: 'Read',
          strict: true,
          input_schema: { type: 'object', properties: { n: { type: 'integer', minimum: 0 } } },
        },
      ],
    });
    expect(strict.status).toBe(400);
    expect(strict.json().error.message).toContain("'minimum'");
  });

  it('counts tokens with messages.count_tokens as the prompt of a message would take them', async () => {
    const params = { model: 'tiny', messages: [{ role: 'user' as const, content: 'Say hello.' }] };
    const counted = await client.messages.countTokens(params);
    const m = await client.messages.create({ ...params, max_tokens: 1 });
    expect(counted.input_tokens).toBe(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0));
  });

  it('checks the key sent as x-api-key or as Bearer; a wrong one is 401 authentication_error', async () => {
    const body = { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] };
    const wrong = await post(body, { 'x-api-key': 'nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const bearer = await request(s.http, {
      path: '/v1/messages',
      body,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    });
    expect(bearer.status).toBe(200);
  });

  it.each([
    ['malformed JSON', '{"model":', 'JSON'],
    ['max_tokens missing', { model: 'tiny', messages: [{ role: 'user', content: 'x' }] }, 'max_tokens'],
    ['a wrong type', { model: 'tiny', max_tokens: 'ten', messages: [{ role: 'user', content: 'x' }] }, 'max_tokens'],
    [
      'an image block',
      { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] },
      'messages[0].content[0]',
    ],
    [
      'an unknown block type',
      { model: 'tiny', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'frob' }] }] },
      'messages[0].content[0].type',
    ],
    [
      'an unknown tool type',
      {
        model: 'tiny',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'frob', name: 'x' }],
      },
      'tools[0].type',
    ],
  ])('answers %s with a 400 in Anthropic shape naming the field', async (_what, body, field) => {
    const r = await post(body);
    expect(r.status).toBe(400);
    const e = r.json();
    expect(e).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(e.error.message).toContain(field);
  });

  it('answers a prompt longer than the context with "prompt is too long" in tokens, and an unknown model with not_found_error', async () => {
    await expect(
      client.messages.create({
        model: 'tiny',
        max_tokens: 1,
        messages: [{ role: 'user', content: 'hello '.repeat(5000) }],
      }),
    ).rejects.toMatchObject({
      status: 400,
      error: { error: { message: expect.stringMatching(/^prompt is too long: \d+ tokens > 2047 maximum$/) } },
    });
    const r = await post({ model: 'claude-x', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
    expect(r.status).toBe(404);
    expect(r.json().error.type).toBe('not_found_error');
  });
});

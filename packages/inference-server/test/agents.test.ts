/**
 * What agent clients need, through the official `openai` client against the server as a real
 * process on the generated tiny model: forced tool calls whose arguments validate (grammars make
 * that hold for any model), streamed calls the client assembles, a tool result round trip,
 * json_object and strict json_schema output, n choices, fresh seeds, the API key, /metrics on
 * the real server, and SSE keep-alive comments while a long prompt is evaluated.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { Prober } from '@vigil/guardian';
import OpenAI from 'openai';
import { BIG_CONTEXT, chat, openaiClient, request, serveTiny, sharedServer, tinyModel, validate } from './helpers.js';

const { dir, model: MODEL } = tinyModel();
const KEY = 'sk-vigil-test-0123456789';

const WEATHER = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 16 },
    days: { type: 'integer' },
    unit: { enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'days', 'unit'],
  additionalProperties: false,
} as const;
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The forecast.', parameters: WEATHER } },
  {
    type: 'function',
    function: {
      name: 'set_alarm',
      parameters: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] },
    },
  },
];
const ask = [{ role: 'user' as const, content: 'What is the weather in Oslo?' }];

const keyFile = join(dir, 'api-key');
const s = sharedServer(() => {
  writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  return serveTiny(MODEL, [...BIG_CONTEXT, '--api-key-file', keyFile, '--sse-keepalive', '0.05']);
}, KEY);

describe('tools', () => {
  it('forces a named function: tool_calls with arguments valid against its schema, finish_reason tool_calls', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await s.openai.chat.completions.create({
        model: 'tiny',
        messages: ask,
        tools,
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        max_tokens: 400,
        temperature: 1,
        seed,
      });
      const c = r.choices[0]!;
      expect(c.finish_reason).toBe('tool_calls');
      expect(c.message.content).toBeNull();
      const call = c.message.tool_calls![0]!;
      expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function' });
      if (call.type !== 'function') throw new Error('not a function call');
      expect(call.function.name).toBe('get_weather');
      expect(validate(WEATHER, JSON.parse(call.function.arguments))).toEqual([]);
    }
  });

  it('"required" calls one of the tools; "none" never calls', async () => {
    const r = await s.openai.chat.completions.create({
      model: 'tiny',
      messages: ask,
      tools,
      tool_choice: 'required',
      max_tokens: 400,
      seed: 7,
    });
    const call = r.choices[0]!.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    const tool = tools.find((t) => t.type === 'function' && t.function.name === call.function.name);
    expect(tool).toBeDefined();
    if (tool?.type !== 'function') throw new Error('no such tool');
    expect(validate(tool.function.parameters, JSON.parse(call.function.arguments))).toEqual([]);
    for (const seed of [1, 2]) {
      const none = await s.openai.chat.completions.create({
        model: 'tiny',
        messages: ask,
        tools,
        tool_choice: 'none',
        max_tokens: 30,
        seed,
      });
      expect(none.choices[0]!.message.tool_calls ?? []).toEqual([]);
      expect(none.choices[0]!.finish_reason).not.toBe('tool_calls');
    }
  });

  it('streams delta.tool_calls with index, which the client assembles into the call', async () => {
    const stream = s.openai.chat.completions.stream({
      model: 'tiny',
      messages: ask,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 400,
      seed: 11,
    });
    let deltas = 0;
    stream.on('chunk', (ch) => {
      for (const t of ch.choices[0]?.delta.tool_calls ?? []) {
        expect(t.index).toBe(0);
        deltas++;
      }
    });
    const done = await stream.finalChatCompletion();
    expect(deltas).toBeGreaterThan(2);
    const c = done.choices[0]!;
    expect(c.finish_reason).toBe('tool_calls');
    const call = c.message.tool_calls![0]!;
    if (call.type !== 'function') throw new Error('not a function call');
    expect(call.id).toMatch(/^call_/);
    expect(call.function.name).toBe('get_weather');
    expect(validate(WEATHER, JSON.parse(call.function.arguments))).toEqual([]);
  });

  it('takes the call and its result back (a tool round trip) and answers with text', async () => {
    const first = await s.openai.chat.completions.create({
      model: 'tiny',
      messages: ask,
      tools,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 400,
      seed: 5,
    });
    const msg = first.choices[0]!.message;
    const call = msg.tool_calls![0]!;
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      ...ask,
      msg,
      { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 4, sky: 'rain' }) },
    ];
    const second = await s.openai.chat.completions.create({
      model: 'tiny',
      messages,
      tools,
      tool_choice: 'none',
      max_tokens: 8,
      temperature: 0,
    });
    expect(second.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(second.choices[0]!.finish_reason).toBe('length');
    // The result is in the prompt: a different result, a different prompt length.
    const longer = await s.openai.chat.completions.create({
      model: 'tiny',
      messages: [...messages.slice(0, 2), { role: 'tool', tool_call_id: call.id, content: 'x'.repeat(200) }],
      tools,
      tool_choice: 'none',
      max_tokens: 1,
    });
    expect(longer.usage!.prompt_tokens).toBeGreaterThan(second.usage!.prompt_tokens);
    // A result for a call nobody made: 400 naming it.
    const bad = s.openai.chat.completions.create({
      model: 'tiny',
      messages: [...ask, { role: 'tool', tool_call_id: 'call_nope', content: 'x' }],
      max_tokens: 1,
    });
    await expect(bad).rejects.toMatchObject({ status: 400, param: 'messages[1].tool_call_id' });
  });
});

describe('structured output', () => {
  it('answers response_format json_object with a JSON object', async () => {
    for (const seed of [1, 2]) {
      const r = await s.openai.chat.completions.create({
        model: 'tiny',
        messages: [{ role: 'user', content: 'Give me JSON.' }],
        response_format: { type: 'json_object' },
        max_tokens: 300,
        seed,
      });
      expect(r.choices[0]!.finish_reason).toBe('stop');
      const v = JSON.parse(r.choices[0]!.message.content!);
      expect(v !== null && typeof v === 'object' && !Array.isArray(v)).toBe(true);
    }
  });

  it('answers a strict json_schema with JSON that validates, parsed by the client', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 12 },
        age: { type: 'integer' },
        tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, maxItems: 3 },
        ok: { type: 'boolean' },
      },
      required: ['name', 'age', 'tags', 'ok'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const r = await s.openai.chat.completions.parse({
        model: 'tiny',
        messages: [{ role: 'user', content: 'A person.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
        max_tokens: 300,
        seed,
      });
      const parsed = r.choices[0]!.message.parsed;
      expect(validate(schema, parsed)).toEqual([]);
    }
  });

  it('refuses a schema feature it cannot enforce with a 400 naming it, without generating', async () => {
    const r = s.openai.chat.completions.create({
      model: 'tiny',
      messages: ask,
      response_format: {
        type: 'json_schema',
        json_schema: {
          name: 'x',
          schema: { type: 'object', properties: { zip: { type: 'string', pattern: '^\\d+$' } } },
        },
      },
    });
    await expect(r).rejects.toMatchObject({ status: 400, param: 'response_format.json_schema.schema' });
    await expect(r).rejects.toThrow(/'pattern' \(at \/properties\/zip\)/);
  });
});

describe('n, seeds', () => {
  it('answers n: 2 with two indexed choices and usage counting both; seed + i per choice', async () => {
    const req = { model: 'tiny', messages: ask, n: 2, max_tokens: 12, temperature: 1.5, seed: 40 };
    const r = await s.openai.chat.completions.create(req);
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.choices[0]!.message.content).not.toBe(r.choices[1]!.message.content);
    expect(r.usage!.completion_tokens).toBe(24);
    const one = await s.openai.chat.completions.create({ ...req, n: 1, seed: 41 });
    expect(one.usage!.prompt_tokens).toBe(r.usage!.prompt_tokens);
    expect(one.choices[0]!.message.content).toBe(r.choices[1]!.message.content);
    const over = s.openai.chat.completions.create({ ...req, n: 5 });
    await expect(over).rejects.toMatchObject({ status: 400, param: 'n' });
  });

  it('streams n: 2 with chunks of both indexes, each ended with its finish_reason', async () => {
    const stream = await s.openai.chat.completions.create({
      model: 'tiny',
      messages: ask,
      n: 2,
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = ['', ''];
    const finish: (string | null)[] = [null, null];
    let total = 0;
    for await (const ch of stream) {
      for (const c of ch.choices) {
        text[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
      if (ch.usage) total = ch.usage.completion_tokens;
    }
    expect(finish).toEqual(['length', 'length']);
    expect(text[0]!.length).toBeGreaterThan(0);
    expect(text[1]!.length).toBeGreaterThan(0);
    expect(total).toBe(12);
  });

  it('samples two unseeded requests of the same second differently', async () => {
    const one = () =>
      s.openai.chat.completions.create({ model: 'tiny', messages: ask, max_tokens: 16, temperature: 1.5 });
    const [a, b] = await Promise.all([one(), one()]);
    expect(a.created).toBeGreaterThanOrEqual(b.created - 1);
    expect(a.choices[0]!.message.content).not.toBe(b.choices[0]!.message.content);
  });
});

describe('the API key', () => {
  it('answers 401 invalid_api_key without the key or with a wrong one; /health stays open', async () => {
    for (const apiKey of ['wrong-key', `${KEY}x`]) {
      const other = openaiClient(s.http, apiKey);
      await expect(other.models.list()).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
      await expect(
        other.chat.completions.create({ model: 'tiny', messages: ask, max_tokens: 1 }),
      ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    }
    for (const path of ['/v1/models', '/v1/chat/completions', '/metrics', '/nope']) {
      const r = await request(s.http, {
        path,
        body: path.includes('chat') ? { model: 'tiny', messages: ask } : undefined,
      });
      expect(r.status).toBe(401);
      expect(r.headers['www-authenticate']).toBe('Bearer');
      expect(r.json()).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_api_key' } });
    }
    expect((await request(s.http, { path: '/health' })).status).toBe(200);
    const ok = await request(s.http, { path: '/v1/models', headers: { authorization: `Bearer ${KEY}` } });
    expect(ok.status).toBe(200);
  });

  it("is sent by the guardian's probe when its apiKeyFile is configured", async () => {
    const prober = new Prober({ budgetMs: 10_000, prompt: 'ping', canaryPrompt: 'ping', canaryMaxTokens: 2 });
    try {
      const withKey = await prober.probe('chat', {
        http: s.http,
        model: 'tiny',
        apiKeyFile: keyFile,
      });
      expect(withKey).toMatchObject({ ok: true });
      const without = await prober.probe('chat', { http: s.http, model: 'tiny' });
      expect(without).toMatchObject({ ok: false, cause: 'http_error' });
      expect(without.snippet).toContain('HTTP 401');
    } finally {
      prober.close();
    }
  });
});

describe('/metrics and keep-alive', () => {
  it('keeps a stream alive with SSE comments while a long prompt is evaluated', async () => {
    const { text: raw } = await request(s.http, {
      body: chat('word '.repeat(12000), { max_tokens: 2, stream: true }),
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
    });
    const firstContent = raw.indexOf('"content":"', raw.indexOf('"content":""') + 1);
    const comment = raw.indexOf(': keep-alive\n\n');
    expect(comment).toBeGreaterThan(0);
    expect(comment).toBeLessThan(firstContent);
    expect(raw.trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('serves Prometheus metrics that count the requests and tokens, and pass promtool', async () => {
    const r = await request(s.http, { path: '/metrics', headers: { authorization: `Bearer ${KEY}` } });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toContain('text/plain; version=0.0.4');
    const get = (re: RegExp) => Number(re.exec(r.text)?.[1] ?? Number.NaN);
    expect(
      get(/^inference_requests_total\{route="\/v1\/chat\/completions",status="200",listener="http"\} (\d+)$/m),
    ).toBeGreaterThan(8);
    expect(
      get(/^inference_requests_total\{route="\/v1\/models",status="401",listener="http"\} (\d+)$/m),
    ).toBeGreaterThanOrEqual(3);
    expect(get(/^inference_completion_tokens_total (\d+)$/m)).toBeGreaterThan(50);
    expect(get(/^inference_prompt_tokens_total (\d+)$/m)).toBeGreaterThan(12000);
    expect(get(/^inference_time_to_first_token_seconds_count (\d+)$/m)).toBeGreaterThan(8);
    expect(r.text).toContain('inference_model_loaded 1');
    expect(r.text).toContain('inference_sequences 2');
    if (spawnSync('promtool', ['--version']).status === 0) {
      const check = spawnSync('promtool', ['check', 'metrics'], { input: r.text, encoding: 'utf8' });
      expect(`${check.stdout}${check.stderr}`).toBe('');
    }
  });
});

/**
 * Pure parts of tools, structured output and metrics: the JSON-schema check (what the grammar
 * enforces, 400 naming the rest), the grammar cache, the request's tools, tool messages, n and
 * response_format, the chat history node-llama-cpp gets, and the Prometheus text (checked by
 * promtool when it is installed).
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { chatHistory } from '../src/history.js';
import { Metrics, routeOf } from '../src/metrics.js';
import { parseCompletionRequest } from '../src/request.js';
import { GrammarCache, toGrammarSchema } from '../src/schema.js';

const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
const badParam = (body: unknown, maxN = 4) => {
  try {
    parseCompletionRequest(body, { maxN });
  } catch (err) {
    return err as { status: number; param: string; message: string; code: string };
  }
  throw new Error('accepted');
};
const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

describe('JSON schemas for grammars', () => {
  it('keeps what the grammar enforces: anyOf as oneOf, definitions as $defs, annotations dropped', () => {
    const s = toGrammarSchema(
      {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        title: 'T',
        type: 'object',
        properties: {
          a: { anyOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }], description: 'd' },
          b: { $ref: '#/definitions/B' },
          c: { type: 'array', items: { enum: ['x', 'y'] }, maxItems: 2 },
          d: { type: 'string', format: 'date' },
        },
        required: ['a', 'b'],
        additionalProperties: false,
        definitions: { B: { type: 'integer' } },
      },
      'p',
    );
    expect(s).toEqual({
      type: 'object',
      properties: {
        a: { oneOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }], description: 'd' },
        b: { $ref: '#/$defs/B' },
        c: { type: 'array', items: { enum: ['x', 'y'] }, maxItems: 2 },
        d: { type: 'string', format: 'date' },
      },
      required: ['a', 'b'],
      additionalProperties: false,
      $defs: { B: { type: 'integer' } },
    });
  });

  it.each([
    [
      { type: 'object', properties: { a: { type: 'string', pattern: '^x' } } },
      "the keyword 'pattern' (at /properties/a)",
    ],
    [
      { type: 'object', properties: { n: { type: 'integer', minimum: 0 } } },
      "the keyword 'minimum' (at /properties/n)",
    ],
    [{ allOf: [{ type: 'string' }] }, "the keyword 'allOf' (at #)"],
    [{ type: 'object', properties: { a: {} } }, 'a schema that allows any value'],
    [{ type: 'string', format: 'email' }, 'the format "email"'],
    [{ type: ['object', 'null'], properties: {} }, 'a list of types that includes "object"'],
    [{ $ref: 'http://x/y' }, 'the reference "http://x/y"'],
    [{ type: 'array', items: { type: 'string' }, uniqueItems: true }, "the keyword 'uniqueItems'"],
  ])('refuses %j with a 400 naming the feature', (schema, what) => {
    const e = badParam({
      ...base,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
    });
    expect(e).toMatchObject({
      status: 400,
      param: 'response_format.json_schema.schema',
      openaiCode: 'unsupported_value',
    });
    expect(e.message).toContain(what);
  });

  it('names the tool whose parameters use an unsupported feature', () => {
    const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object', not: {} } } };
    expect(badParam({ ...base, tools: [weather, tool] })).toMatchObject({
      param: 'tools[1].function.parameters',
      openaiCode: 'unsupported_value',
    });
  });

  it('compiles a schema once, keeps the most recently used up to its capacity, and drops failures', async () => {
    let compiled = 0;
    const cache = new GrammarCache(async (s) => {
      compiled++;
      if (s.fail) throw new Error('no');
      return { s };
    }, 2);
    const a = await cache.get({ type: 'string' });
    expect(await cache.get({ type: 'string' })).toBe(a);
    await cache.get({ type: 'number' });
    await cache.get({ type: 'string' }); // most recent now
    await cache.get({ type: 'boolean' }); // evicts number
    expect(compiled).toBe(3);
    await cache.get({ type: 'string' });
    expect(compiled).toBe(3);
    await cache.get({ type: 'number' });
    expect(compiled).toBe(4);
    expect(cache.size).toBe(2);
    await expect(cache.get({ fail: true })).rejects.toThrow('no');
    await expect(cache.get({ fail: true })).rejects.toThrow('no');
    expect(compiled).toBe(6);
  });
});

describe('tools, tool messages, n and response_format in requests', () => {
  it('takes tools and tool_choice as OpenAI sends them', () => {
    expect(parseCompletionRequest({ ...base, tools: [weather] })).toMatchObject({
      toolChoice: 'auto',
      parallelToolCalls: true,
      tools: [{ name: 'get_weather', description: null, parameters: weather.function.parameters }],
    });
    const named = parseCompletionRequest({
      ...base,
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
    });
    expect(named).toMatchObject({ toolChoice: { name: 'get_weather' }, parallelToolCalls: false });
    expect(parseCompletionRequest({ ...base, tools: [weather], tool_choice: 'none' }).toolChoice).toBe('none');
  });

  it('refuses a tool_choice without tools or naming a function not listed, and bad or repeated names', () => {
    expect(badParam({ ...base, tool_choice: 'auto' })).toMatchObject({ param: 'tool_choice' });
    expect(
      badParam({ ...base, tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }),
    ).toMatchObject({ param: 'tool_choice.function.name' });
    expect(badParam({ ...base, tools: [weather], tool_choice: 'always' })).toMatchObject({ param: 'tool_choice' });
    const bad = { type: 'function', function: { name: 'has space' } };
    expect(badParam({ ...base, tools: [bad] })).toMatchObject({ param: 'tools[0].function.name' });
    expect(badParam({ ...base, tools: [weather, weather] })).toMatchObject({ param: 'tools[1].function.name' });
  });

  it('takes tool results only for calls made before them', () => {
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } };
    const r = parseCompletionRequest({
      ...base,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [call] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"c":4}' },
      ],
    });
    expect(r.messages[1]).toEqual({
      role: 'assistant',
      content: '',
      toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' }],
    });
    expect(r.messages[2]).toEqual({ role: 'tool', content: '{"c":4}', toolCallId: 'call_1' });
    expect(badParam({ ...base, messages: [{ role: 'tool', tool_call_id: 'x', content: 'r' }] })).toMatchObject({
      param: 'messages[0].tool_call_id',
    });
    expect(badParam({ ...base, messages: [{ role: 'tool', content: 'r' }] })).toMatchObject({
      param: 'messages[0].tool_call_id',
      openaiCode: 'missing_required_parameter',
    });
  });

  it('renders calls with their results in the model turn, which the model then continues', () => {
    const h = chatHistory([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'w', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', content: '{"c":4}', toolCallId: 'c1' },
    ]);
    expect(h).toEqual([
      { type: 'user', text: 'weather?' },
      { type: 'model', response: [{ type: 'functionCall', name: 'w', params: { city: 'Oslo' }, result: { c: 4 } }] },
    ]);
    expect(chatHistory([{ role: 'user', content: 'x' }])).toEqual([
      { type: 'user', text: 'x' },
      { type: 'model', response: [] },
    ]);
  });

  it('takes n up to --max-n, and response_format json_object and json_schema', () => {
    expect(parseCompletionRequest({ ...base, n: 3 }, { maxN: 3 }).n).toBe(3);
    const e = badParam({ ...base, n: 4 }, 3);
    expect(e).toMatchObject({ param: 'n', openaiCode: 'invalid_value' });
    expect(e.message).toContain('--max-n');
    expect(parseCompletionRequest({ ...base, response_format: { type: 'json_object' } }).responseFormat).toEqual({
      type: 'json_object',
    });
    const schema = { type: 'object', properties: { a: { type: 'integer' } }, required: ['a'] };
    expect(
      parseCompletionRequest({ ...base, response_format: { type: 'json_schema', json_schema: { name: 'a', schema } } })
        .responseFormat,
    ).toEqual({ type: 'json_schema', name: 'a', schema });
    expect(badParam({ ...base, response_format: { type: 'json_schema', json_schema: { name: 'a' } } })).toMatchObject({
      param: 'response_format.json_schema.schema',
      openaiCode: 'missing_required_parameter',
    });
    expect(badParam({ ...base, tools: [weather], response_format: { type: 'json_object' } })).toMatchObject({
      param: 'response_format',
      openaiCode: 'unsupported_value',
    });
  });
});

describe('metrics', () => {
  const sample = () => {
    const m = new Metrics();
    m.request('/v1/chat/completions', 200, 'http', 0.8);
    m.request('/v1/chat/completions', 400, 'mtls', 0.001);
    m.request('/v1/models/tiny', 200, 'http', 0.0002);
    m.request('/etc/passwd', 404, 'http', 0.0001);
    m.tokens(12, 30);
    m.firstToken(0.07);
    return m.render({ state: 'ready', queued: 2, busy: 1, sequences: 2 });
  };

  it('bounds the route label to the served paths', () => {
    expect(routeOf('/v1/models/x"y')).toBe('/v1/models/{id}');
    expect(routeOf('/anything')).toBe('other');
  });

  it('writes counters, histograms and gauges in the text format', () => {
    const text = sample();
    expect(text).toContain('inference_requests_total{route="/v1/chat/completions",status="200",listener="http"} 1');
    expect(text).toContain('inference_requests_total{route="other",status="404",listener="http"} 1');
    expect(text).toContain('inference_prompt_tokens_total 12');
    expect(text).toContain('inference_completion_tokens_total 30');
    expect(text).toContain('inference_time_to_first_token_seconds_bucket{le="0.05"} 0');
    expect(text).toContain('inference_time_to_first_token_seconds_bucket{le="0.1"} 1');
    expect(text).toContain('inference_time_to_first_token_seconds_count 1');
    expect(text).toContain('inference_request_duration_seconds_bucket{route="/v1/chat/completions",le="+Inf"} 2');
    expect(text).toContain('inference_queue_depth 2');
    expect(text).toContain('inference_busy_sequences 1');
    expect(text).toContain('inference_model_loaded 1');
    expect(text).toContain('inference_model_state{state="loading"} 0');
    // Every sample line is NAME{LABELS} VALUE; every family has HELP and TYPE first.
    const families = new Set<string>();
    for (const line of text.trimEnd().split('\n')) {
      if (line.startsWith('# TYPE ')) families.add(line.split(' ')[2]!);
      else if (!line.startsWith('# HELP ')) {
        expect(line).toMatch(/^[a-z_]+(\{[a-z_]+="[^"\n]*"(,[a-z_]+="[^"\n]*")*\})? [0-9.e+-]+$/);
        const name = line.replace(/[{ ].*$/, '').replace(/_(bucket|sum|count)$/, '');
        expect(families.has(name) || families.has(line.replace(/[{ ].*$/, ''))).toBe(true);
      }
    }
  });

  const promtool = spawnSync('promtool', ['--version']).status === 0;
  (promtool ? it : it.skip)('passes promtool check metrics', () => {
    const r = spawnSync('promtool', ['check', 'metrics'], { input: sample(), encoding: 'utf8' });
    expect(`${r.stdout}${r.stderr}`).toBe('');
    expect(r.status).toBe(0);
  });
});

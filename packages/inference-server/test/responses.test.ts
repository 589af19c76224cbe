/**
 * POST /v1/responses through the official `openai` client and `@openai/agents`, against the
 * server as a real process on the generated tiny model (one server for the file): plain and
 * streamed responses with the documented events, a two-turn tool loop with
 * function_call_output (and the same through previous_response_id), text.format json_schema,
 * namespace tools called back with their namespace, hosted tools left out, and 400s naming the field.
 */
import { describe, expect, it } from '@jest/globals';
import { Agent, run, setDefaultOpenAIKey, setOpenAIAPI, setTracingDisabled, tool } from '@openai/agents';
import type OpenAI from 'openai';
import { request, serveTiny, sharedServer, tinyModel, url, validate } from './helpers.js';

const { model: MODEL } = tinyModel();
const s = sharedServer(() => serveTiny(MODEL, ['--context-size', '4096', '--threads', '1']));

const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer' } },
  required: ['city', 'days'],
  additionalProperties: false,
} as const;
const weatherTool: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The forecast.',
  parameters: WEATHER,
  strict: true,
};
const post = (body: object) => request(s.http, { path: '/v1/responses', body });

describe('POST /v1/responses', () => {
  it('answers responses.create with a message item, output_text, status and usage', async () => {
    const r = await s.openai.responses.create({ model: 'tiny', input: 'Say hello.', max_output_tokens: 8 });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    expect(r.status).toBe('incomplete');
    expect(r.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    const item = r.output[0]!;
    expect(item.type).toBe('message');
    if (item.type !== 'message') throw new Error('not a message');
    const part = item.content[0]!;
    expect(part.type).toBe('output_text');
    expect(r.output_text).toBe(part.type === 'output_text' ? part.text : null);
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage).toMatchObject({ output_tokens: 8 });
    expect(r.usage!.input_tokens).toBeGreaterThan(0);
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + 8);
  });

  it('streams the documented events in order, numbered, with deltas that make the final text', async () => {
    const stream = await s.openai.responses.create({
      model: 'tiny',
      instructions: 'Be brief.',
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }],
      max_output_tokens: 6,
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const e of stream) events.push(e);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
    ]);
    expect(types.slice(-4)).toEqual([
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
    const last = events[events.length - 1]!;
    if (last.type !== 'response.incomplete') throw new Error('not incomplete');
    expect(deltas.join('')).toBe(last.response.output_text);
    expect(last.response.instructions).toBe('Be brief.');
    expect(last.response.usage?.output_tokens).toBe(6);
  });

  it('runs a two-turn tool loop: a function_call, then its function_call_output answered with text', async () => {
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'Weather in Oslo?' }];
    const first = await s.openai.responses.create({
      model: 'tiny',
      input,
      tools: [weatherTool],
      tool_choice: { type: 'function', name: 'get_weather' },
      max_output_tokens: 200,
    });
    expect(first.status).toBe('completed');
    const call = first.output.find((o) => o.type === 'function_call');
    if (call?.type !== 'function_call') throw new Error(`no call in ${JSON.stringify(first.output)}`);
    expect(call.name).toBe('get_weather');
    expect(call.call_id).toMatch(/^call_/);
    expect(validate(WEATHER, JSON.parse(call.arguments))).toEqual([]);

    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: '{"temp":21}' };
    const second = await s.openai.responses.create({
      model: 'tiny',
      input: [...input, call, output],
      tools: [weatherTool],
      tool_choice: 'none',
      max_output_tokens: 8,
    });
    expect(second.output.map((o) => o.type)).toEqual(['message']);
    expect(second.output_text.length).toBeGreaterThan(0);
    // The call and its result were in the prompt: it is longer than the question's alone.
    const alone = await s.openai.responses.create({ model: 'tiny', input, max_output_tokens: 1 });
    expect(second.usage!.input_tokens).toBeGreaterThan(alone.usage!.input_tokens + 5);

    // The same second turn through previous_response_id: only the output is sent.
    const chained = await s.openai.responses.create({
      model: 'tiny',
      previous_response_id: first.id,
      input: [output],
      tools: [weatherTool],
      tool_choice: 'none',
      max_output_tokens: 8,
    });
    expect(chained.previous_response_id).toBe(first.id);
    expect(chained.usage!.input_tokens).toBe(second.usage!.input_tokens);
  });

  it('answers an unknown previous_response_id with 404 previous_response_not_found, and store:false keeps nothing', async () => {
    const unknown = await post({ model: 'tiny', input: 'x', previous_response_id: 'resp_nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.json().error).toMatchObject({ code: 'previous_response_not_found', param: 'previous_response_id' });
    const r = await s.openai.responses.create({ model: 'tiny', input: 'x', max_output_tokens: 2, store: false });
    const after = await post({ model: 'tiny', input: 'y', previous_response_id: r.id, max_output_tokens: 2 });
    expect(after.status).toBe(404);
  });

  it('answers text.format json_schema with JSON valid against the schema', async () => {
    const r = await s.openai.responses.create({
      model: 'tiny',
      input: 'The weather, as JSON.',
      text: { format: { type: 'json_schema', name: 'weather', schema: WEATHER, strict: true } },
      max_output_tokens: 200,
    });
    expect(r.status).toBe('completed');
    expect(validate(WEATHER, JSON.parse(r.output_text))).toEqual([]);
  });

  it('offers namespace tools as their functions, calls them back with the namespace; leaves hosted tools out', async () => {
    const r = await post({
      model: 'tiny',
      input: [
        { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You run sub-agents.' }] },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Spawn one.' }] },
      ],
      tools: [
        { type: 'web_search', external_web_access: false },
        {
          type: 'namespace',
          name: 'agents_v1',
          description: 'Sub-agents.',
          tools: [{ type: 'function', name: 'spawn', parameters: WEATHER }],
        },
      ],
      tool_choice: { type: 'function', name: 'spawn', namespace: 'agents_v1' },
      parallel_tool_calls: true,
      reasoning: { summary: 'auto' },
      store: false,
      include: ['reasoning.encrypted_content'],
      prompt_cache_key: 'k',
      client_metadata: { a: 'b' },
      max_output_tokens: 200,
    });
    expect(r.status).toBe(200);
    const call = r.json().output.find((o: { type: string }) => o.type === 'function_call');
    expect(call).toMatchObject({ name: 'spawn', namespace: 'agents_v1' });
    expect(validate(WEATHER, JSON.parse(call.arguments))).toEqual([]);
    await s.process.waitForLog('"msg":"hosted tool left out');
  });

  it.each([
    ['malformed JSON', '{"model":', null],
    ['a wrong type', { model: 'tiny', input: 3 }, 'input'],
    [
      'an image',
      { model: 'tiny', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] },
      'input[0].content[0].type',
    ],
    ['an unknown item type', { model: 'tiny', input: [{ type: 'item_reference', id: 'x' }] }, 'input[0].type'],
    ['an unknown tool type', { model: 'tiny', input: 'x', tools: [{ type: 'frobnicate' }] }, 'tools[0].type'],
    [
      'an output without its call',
      { model: 'tiny', input: [{ type: 'function_call_output', call_id: 'c', output: 'x' }] },
      'input[0].call_id',
    ],
  ])('answers %s with a 400 in OpenAI shape naming the field', async (_what, body, param) => {
    const r = await request(s.http, { path: '/v1/responses', body: body as string | object });
    expect(r.status).toBe(400);
    expect(r.json().error).toMatchObject({ type: 'invalid_request_error', param });
  });

  it('answers a prompt longer than the context with context_length_exceeded', async () => {
    const r = await post({ model: 'tiny', input: 'hello '.repeat(5000), max_output_tokens: 2 });
    expect(r.status).toBe(400);
    expect(r.json().error).toMatchObject({ code: 'context_length_exceeded', param: 'input' });
  });

  it('runs an @openai/agents agent (Responses model, toolChoice required): the tool runs, the run ends with output', async () => {
    process.env.OPENAI_BASE_URL = `${url(s.http)}/v1`;
    setDefaultOpenAIKey('unused');
    setOpenAIAPI('responses');
    setTracingDisabled(true);
    const cities: string[] = [];
    const weather = tool({
      name: 'get_weather',
      description: 'The forecast for a city.',
      parameters: WEATHER as never,
      strict: true,
      execute: async (args) => {
        cities.push(String((args as { city: string }).city));
        return 'Sunny, 21 degrees.';
      },
    });
    const agent = new Agent({
      name: 'weather',
      instructions: 'Answer with the weather.',
      model: 'tiny',
      tools: [weather],
      modelSettings: { toolChoice: 'required', maxTokens: 200 },
      toolUseBehavior: 'stop_on_first_tool',
    });
    const result = await run(agent, 'Weather in Oslo?', { maxTurns: 3 });
    expect(cities).toHaveLength(1);
    expect(result.finalOutput).toBe('Sunny, 21 degrees.');
  });
});

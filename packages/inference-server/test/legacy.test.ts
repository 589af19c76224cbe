/**
 * POST /v1/completions (legacy, raw prompt) and POST /v1/embeddings through the official `openai`
 * client, against the server as a real process on the generated tiny model (one server for the
 * file): plain and streamed completions, several prompts, seeds that reproduce, the refused
 * fields; vectors of the model's embedding size, the same for the same input, base64 as floats.
 */
import { describe, expect, it } from '@jest/globals';
import { PRESETS } from '../src/gguf/vocabulary.js';
import { request, serveTiny, sharedServer, tinyModel } from './helpers.js';

const { model: MODEL } = tinyModel();
const s = sharedServer(() => serveTiny(MODEL, ['--context-size', '2048', '--threads', '1']));

describe('POST /v1/completions', () => {
  it('continues the raw prompt: text_completion, finish_reason, usage; 16 tokens when max_tokens is absent', async () => {
    const r = await s.openai.completions.create({ model: 'tiny', prompt: 'Once upon a time' });
    expect(r.object).toBe('text_completion');
    expect(r.choices).toHaveLength(1);
    expect(r.choices[0]).toMatchObject({ index: 0, finish_reason: 'length', logprobs: null });
    expect(r.usage).toMatchObject({ completion_tokens: 16 });
    // The raw prompt, no chat template around it: fewer tokens than the same text as a chat message.
    const asChat = await s.openai.chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 1,
    });
    expect(r.usage!.prompt_tokens).toBeLessThan(asChat.usage!.prompt_tokens);
  });

  it('answers each prompt of an array with its own choice; the same seed gives the same texts', async () => {
    const body = { model: 'tiny', prompt: ['Once', 'Twice'], max_tokens: 6, seed: 7 };
    const r = await s.openai.completions.create(body);
    expect(r.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(r.usage!.completion_tokens).toBe(12);
    const one = await s.openai.completions.create({ ...body, prompt: 'Once' });
    // Both prompts count.
    expect(r.usage!.prompt_tokens).toBeGreaterThan(one.usage!.prompt_tokens);
    const again = await s.openai.completions.create(body);
    expect(again.choices.map((c) => c.text)).toEqual(r.choices.map((c) => c.text));
  });

  it('streams text pieces that make the text, the finish_reason, usage and [DONE]', async () => {
    const stream = await s.openai.completions.create({
      model: 'tiny',
      prompt: 'Once',
      max_tokens: 5,
      seed: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let tokens = 0;
    for await (const c of stream) {
      for (const ch of c.choices) {
        text += ch.text;
        finish = ch.finish_reason ?? finish;
      }
      if (c.usage) tokens = c.usage.completion_tokens;
    }
    expect(finish).toBe('length');
    expect(tokens).toBe(5);
    const whole = await s.openai.completions.create({ model: 'tiny', prompt: 'Once', max_tokens: 5, seed: 3 });
    expect(text).toBe(whole.choices[0]!.text);
  });

  it.each([
    ['echo', { echo: true }, 'echo'],
    ['suffix', { suffix: 'end' }, 'suffix'],
    ['a token array', { prompt: [[1, 2, 3]] }, 'prompt'],
    ['a wrong type', { max_tokens: 'ten' }, 'max_tokens'],
  ])('refuses %s with a 400 naming the field', async (_what, fields, param) => {
    const r = await request(s.http, { path: '/v1/completions', body: { model: 'tiny', prompt: 'x', ...fields } });
    expect(r.status).toBe(400);
    expect(r.json().error.param).toBe(param);
  });
});

describe('one pipeline', () => {
  it('counts each route under its own name in /metrics', async () => {
    await s.openai.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 });
    await s.openai.embeddings.create({ model: 'tiny', input: 'x' });
    const m = await request(s.http, { path: '/metrics' });
    expect(m.text).toMatch(/route="\/v1\/completions"[^\n]*status="200"/);
    expect(m.text).toMatch(/route="\/v1\/embeddings"[^\n]*status="200"/);
  });
});

describe('POST /v1/embeddings', () => {
  it("answers vectors of the model's embedding size; the same input gives the same vector", async () => {
    const r = await s.openai.embeddings.create({ model: 'tiny', input: ['hello world', 'goodbye', 'hello world'] });
    expect(r.object).toBe('list');
    expect(r.data.map((d) => d.index)).toEqual([0, 1, 2]);
    for (const d of r.data) expect(d.embedding).toHaveLength(PRESETS.tiny.nEmbd);
    expect(r.data[2]!.embedding).toEqual(r.data[0]!.embedding);
    expect(r.data[1]!.embedding).not.toEqual(r.data[0]!.embedding);
    expect(r.usage.prompt_tokens).toBeGreaterThan(3);
    const one = await s.openai.embeddings.create({ model: 'tiny', input: 'hello world' });
    expect(one.data[0]!.embedding).toEqual(r.data[0]!.embedding);
  });

  it('answers base64 as the little-endian float32s of the same vector', async () => {
    const floats = await s.openai.embeddings.create({ model: 'tiny', input: 'abc', encoding_format: 'float' });
    const raw = await request(s.http, {
      path: '/v1/embeddings',
      body: { model: 'tiny', input: 'abc', encoding_format: 'base64' },
    });
    const b = Buffer.from(raw.json().data[0].embedding as string, 'base64');
    const decoded = Array.from({ length: b.length / 4 }, (_, i) => b.readFloatLE(i * 4));
    expect(decoded).toEqual(floats.data[0]!.embedding.map((x) => Math.fround(x)));
  });

  it.each([
    ['dimensions', { dimensions: 8 }, 'dimensions'],
    ['a token array', { input: [[1, 2]] }, 'input'],
    ['a missing input', { input: undefined }, 'input'],
  ])('refuses %s with a 400 naming the field', async (_what, fields, param) => {
    const r = await request(s.http, { path: '/v1/embeddings', body: { model: 'tiny', input: 'x', ...fields } });
    expect(r.status).toBe(400);
    expect(r.json().error.param).toBe(param);
  });
});

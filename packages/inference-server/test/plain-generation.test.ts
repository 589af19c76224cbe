/**
 * Plain generation (engine-plain.ts): an answer with no tools and no grammar comes from the token
 * loop itself. It must answer what LlamaChat answers: the same text, the same end, the same stop
 * sequence, for greedy and seeded sampling, with penalties and with stop strings; and its stream
 * must add up to its text. The model is loaded in a child process (never in jest's).
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { findStop, heldBack } from '../src/engine-plain.js';
import { makeTiny, tmpDir } from './helpers.js';

const run = promisify(execFile);
const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

describe('stop strings in generated text', () => {
  it.each([
    // text, stops, search from, match
    ['hello world', ['wor'], 0, { at: 6, stop: 'wor' }],
    ['hello world', ['wor', 'lo'], 0, { at: 3, stop: 'lo' }],
    ['hello world', ['xyz'], 0, null],
    // From: a match must end after what was searched before (the last chunk's start).
    ['hello world', ['hel'], 9, null],
    ['hello world', ['world'], 7, { at: 6, stop: 'world' }],
    ['<|im_end|>', ['<|im_end|>'], 9, { at: 0, stop: '<|im_end|>' }],
  ])('findStop(%j, %j, %d)', (text, stops, from, match) => {
    expect(findStop(text, stops, from)).toEqual(match);
  });

  it.each([
    // text, stops, characters held back (the longest end that starts a stop string)
    ['abc <|im', ['<|im_end|>'], 4],
    ['abc <', ['<|im_end|>', 'END'], 1],
    ['abc E', ['<|im_end|>', 'END'], 1],
    ['abc EN', ['<|im_end|>', 'END'], 2],
    ['abc', ['<|im_end|>', 'END'], 0],
    ['ab', ['abc'], 2],
    ['xx', [], 0],
  ])('heldBack(%j, %j) = %d', (text, stops, held) => {
    expect(heldBack(text, stops)).toBe(held);
  });
});

describe('plain generation answers as LlamaChat', () => {
  const tmp = tmpDir();
  const model = join(tmp.dir, 'tiny.gguf');
  type Answer = { text: string; finishReason: string; stopSequence: string | null; completionTokens: number };
  let results: {
    name: string;
    chat: { text: string; finishReason: string; stopSequence: string | null };
    plain: Answer;
    streamed: string;
    /** The same through direct steps (engine-step.ts), how many steps went direct, and what the sequence held after. */
    direct: Answer;
    streamedDirect: string;
    steps: number;
    held: number;
    prompt: number;
    /** The same prompt again through evaluate, on the sequence the direct steps left. */
    again: Answer;
    stop: string | null;
  }[];
  let lock: { waited: boolean; decoded: boolean };

  beforeAll(async () => {
    await makeTiny(model);
    // Both paths on the same model and context, each on its own sequence, cleared between runs.
    const script = join(tmp.dir, 'compare.mjs');
    writeFileSync(
      script,
      `
const { createRequire } = await import('node:module');
const lib = await import(createRequire(${JSON.stringify(join(DIST, '..', 'package.json'))}).resolve('node-llama-cpp'));
const { completeChat } = await import(${JSON.stringify(join(DIST, 'engine-chat.js'))});
const { completePlain, plainStops } = await import(${JSON.stringify(join(DIST, 'engine-plain.js'))});
const { contextLock, directSteps } = await import(${JSON.stringify(join(DIST, 'engine-step.js'))});
const llama = await lib.getLlama({ gpu: false, logLevel: 'error' });
const model = await llama.loadModel({ modelPath: process.argv[2] });
const context = await model.createContext({ sequences: 2, threads: 1, contextSize: 1024 });
const [a, b] = [context.getSequence(), context.getSequence()];
const wrapper = lib.resolveChatWrapper(model);
const stops = plainStops(wrapper, model);
if (!stops) throw new Error('no plain path for the generated model');
const messages = [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'tell me about the river' }];
const tokens = wrapper.generateContextState({ chatHistory: [{ type: 'system', text: 'be brief' }, { type: 'user', text: 'tell me about the river' }, { type: 'model', response: [] }] }).contextText.tokenize(model.tokenizer);
const base = { messages, maxTokens: 48, temperature: 0, topP: 1, seed: null, stop: [], frequencyPenalty: 0, presencePenalty: 0 };
const input = (o, extra = {}) => ({ ...base, ...o, signal: new AbortController().signal, ...extra });
const out = [];
// Direct steps (engine-step.ts) while the completion is alone; \`alone\` may change between steps.
const alone = (f = () => true) => ({ alone: f, threads: 1 });
async function compare(name, o, stepping = alone()) {
  await a.clearHistory(); await b.clearHistory();
  const chat = await completeChat(lib, wrapper, a, 48, input(o));
  let streamed = '';
  const plain = await completePlain(b, tokens, 48, stops, input(o, { onText: (t) => { streamed += t; } }));
  await b.clearHistory();
  const before = directSteps();
  let streamedDirect = '';
  const direct = await completePlain(b, tokens, 48, stops, input(o, { onText: (t) => { streamedDirect += t; } }), stepping);
  const steps = directSteps() - before;
  const held = b.contextTokens.length;
  // Then the same prompt again through evaluate, on what the direct steps left in the sequence.
  const again = await completePlain(b, tokens, 48, stops, input(o));
  out.push({ name, chat, plain, streamed, direct, streamedDirect, steps, held, prompt: tokens.length, again, stop: o.stop?.[0] ?? null });
  return plain;
}
const greedy = await compare('greedy', {});
await compare('seeded', { temperature: 1.3, seed: 7 });
await compare('penalties', { temperature: 1.3, seed: 11, frequencyPenalty: 0.8, presencePenalty: 0.6 });
await compare('greedy with penalties', { frequencyPenalty: 0.8, presencePenalty: 0.6 });
await compare('stop string', { stop: [greedy.text.slice(9, 13)] });
await compare('stop string never met', { stop: ['\\u00e9\\u00e9\\u00e9'] });
let k = 0;
// Alone for four looks, then not for four: the steps switch back and forth.
await compare('alone now and then', {}, alone(() => ++k % 8 < 4));
await compare('never alone', {}, alone(() => false));
// The lock the direct steps take is node-llama-cpp's own: held, it keeps another sequence's decode waiting.
await a.clearHistory();
const acquire = await contextLock();
const held = await acquire([context, 'context']);
let decoded = false;
const decode = a.evaluateWithoutGeneratingNewTokens(model.tokenize('a few words')).then(() => { decoded = true; });
await new Promise((r) => setTimeout(r, 300));
const waited = !decoded;
held.dispose();
await decode;
process.stdout.write(JSON.stringify({ out, lock: { waited, decoded } }));
process.exit(0);
`,
    );
    const { stdout } = await run(process.execPath, [script, model], {
      timeout: 60_000,
      cwd: fileURLToPath(new URL('..', import.meta.url)),
    });
    ({ out: results, lock } = JSON.parse(stdout));
  }, 90_000);
  afterAll(() => tmp.cleanup());

  it("direct steps take node-llama-cpp's own lock of the context: held, another decode waits for it", () => {
    expect(lock).toEqual({ waited: true, decoded: true });
  });

  const CASES = [
    'greedy',
    'seeded',
    'penalties',
    'greedy with penalties',
    'stop string',
    'stop string never met',
    'alone now and then',
    'never alone',
  ];
  it.each(CASES)('%s: same text and end', (name) => {
    const r = results.find((x) => x.name === name)!;
    expect(r.plain.text.length).toBeGreaterThan(0);
    expect(r.plain.text).toBe(r.chat.text);
    expect(r.plain.finishReason).toBe(r.chat.finishReason);
    expect(r.plain.stopSequence).toBe(r.chat.stopSequence);
    // What was streamed is the text, whole.
    expect(r.streamed).toBe(r.plain.text);
  });

  it.each(CASES)(
    '%s, with direct steps: the same text and end, and the sequence left as evaluate leaves it',
    (name) => {
      const r = results.find((x) => x.name === name)!;
      expect(r.direct.text).toBe(r.chat.text);
      expect(r.direct.finishReason).toBe(r.chat.finishReason);
      expect(r.direct.stopSequence).toBe(r.chat.stopSequence);
      expect(r.streamedDirect).toBe(r.direct.text);
      // The prompt reused from what the direct steps left answers the same again.
      expect(r.again.text).toBe(r.chat.text);
    },
  );

  it('steps go direct while the completion is alone, through evaluate otherwise, never for a seeded sampler', () => {
    const steps = Object.fromEntries(results.map((r) => [r.name, r.steps]));
    // 48 tokens: the first sampled after the prompt's evaluation, the other 47 by direct steps.
    expect(steps).toMatchObject({ greedy: 47, 'greedy with penalties': 47, 'stop string never met': 47 });
    expect(steps['stop string']).toBeGreaterThan(0);
    expect(steps['alone now and then']).toBeGreaterThan(5);
    expect(steps['alone now and then']).toBeLessThan(40);
    expect(steps).toMatchObject({ seeded: 0, penalties: 0, 'never alone': 0 });
    // The sequence holds the prompt and every token decoded: all generated but the last sampled
    // (the 48th, the last the caller takes, is not decoded ahead).
    const greedy = results.find((x) => x.name === 'greedy')!;
    expect(greedy.held).toBe(greedy.prompt + 47);
  });

  it('a token sampled directly is decoded while the caller takes it, and that decode has ended when the answer returns', () => {
    // Stopped by a stop string, the caller had already taken the last token, whose decode began
    // as it was handed over: the sequence holds every token sampled (the first sampled after the
    // prompt, the others by direct steps), and holds it as soon as the answer returns.
    const r = results.find((x) => x.name === 'stop string')!;
    expect(r.steps).toBeGreaterThan(0);
    expect(r.held).toBe(r.prompt + r.steps + 1);
  });

  it('a stop string ends the answer before it, and is reported', () => {
    const r = results.find((x) => x.name === 'stop string')!;
    const greedy = results.find((x) => x.name === 'greedy')!;
    expect(r.stop).toBeTruthy();
    expect(r.plain).toMatchObject({ finishReason: 'stop', stopSequence: r.stop });
    expect(greedy.plain.text.startsWith(r.plain.text)).toBe(true);
    expect(r.plain.text).not.toContain(r.stop);
    expect(r.plain.completionTokens).toBeLessThan(48);
  });

  it('sampling settings change the answer (the comparison is not of one text)', () => {
    const texts = new Set(['greedy', 'seeded', 'penalties'].map((n) => results.find((x) => x.name === n)!.plain.text));
    expect(texts.size).toBe(3);
    const long = results.find((x) => x.name === 'greedy')!;
    expect(long.plain).toMatchObject({ finishReason: 'length', completionTokens: 48 });
  });
});

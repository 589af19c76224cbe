/**
 * `make-model --end-answers`: a generated model whose turns end, for protocol smoke tests of agent
 * programs. Through the server as a real process and the official clients, every protocol's turn
 * finishes with its own "the model ended" reason after few tokens, at a sampling temperature and
 * with plenty of room left; the same flags without it give a model that runs to the limit.
 */
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readGgufSummary } from '../src/index.js';
import {
  cli,
  makeTiny,
  openaiClient,
  type SharedServer,
  serveTiny,
  sha256,
  sharedServer,
  tmpDir,
  url,
} from './helpers.js';

const tmp = tmpDir();
const ENDS = join(tmp.dir, 'ends.gguf');
const ENDS_Q8 = join(tmp.dir, 'ends-q8_0.gguf');
const PLAIN = join(tmp.dir, 'plain.gguf');
beforeAll(async () => {
  await makeTiny(ENDS, ['--end-answers']);
  await makeTiny(ENDS_Q8, ['--end-answers', '--type', 'q8_0']);
  await makeTiny(PLAIN);
});
afterAll(() => tmp.cleanup());

/** "Few": the model may emit a token or two before the end-of-turn token, never a long answer. */
const FEW = 3;
const ROOM = 200;
const server = (model: string) => sharedServer(() => serveTiny(model, ['--context-size', '2048', '--threads', '1']));
const s = server(ENDS);

describe('make-model --end-answers', () => {
  it('writes a deterministic model, named as such, other than the plain one of the same seed', async () => {
    const again = join(tmp.dir, 'again.gguf');
    const r = await cli(['make-model', '--out', again, '--end-answers']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ endAnswers: true, preset: 'tiny', type: 'f16', seed: 1 });
    expect(sha256(again)).toBe(sha256(ENDS));
    expect(sha256(again)).not.toBe(sha256(PLAIN));
    const summary = await readGgufSummary(ENDS);
    expect(JSON.stringify(summary)).toContain('vigil-tiny-f16-seed1-ends');
  });

  it('ends a chat completion with finish_reason "stop" (openai chat.completions)', async () => {
    const c = await openaiClient(s.http).chat.completions.create({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: ROOM,
      temperature: 1,
    });
    expect(c.choices[0]!.finish_reason).toBe('stop');
    expect(c.usage!.completion_tokens).toBeLessThanOrEqual(FEW);
  });

  it('ends a Responses turn "completed", streamed and not (openai responses)', async () => {
    const client = openaiClient(s.http);
    const r = await client.responses.create({ model: 'tiny', input: 'Say hello.', max_output_tokens: ROOM });
    expect(r.status).toBe('completed');
    expect(r.incomplete_details ?? null).toBeNull();
    expect(r.usage!.output_tokens).toBeLessThanOrEqual(FEW);
    const types: string[] = [];
    for await (const e of await client.responses.create({
      model: 'tiny',
      input: [
        { role: 'developer', content: 'Be brief.' },
        { role: 'user', content: 'Say hello.' },
      ],
      max_output_tokens: ROOM,
      stream: true,
    })) {
      types.push(e.type);
    }
    expect(types.at(-1)).toBe('response.completed');
  });

  it('ends an Anthropic message with stop_reason "end_turn" (@anthropic-ai/sdk)', async () => {
    const a = new Anthropic({ baseURL: url(s.http), apiKey: 'unused', maxRetries: 0 });
    const m = await a.messages.create({
      model: 'tiny',
      max_tokens: ROOM,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Say hello.' }],
    });
    expect(m.stop_reason).toBe('end_turn');
    expect(m.usage.output_tokens).toBeLessThanOrEqual(FEW);
  });
});

describe('the q8_0 model ends too; the plain model does not', () => {
  const q8 = server(ENDS_Q8);
  const plain = server(PLAIN);
  const ask = (srv: SharedServer) =>
    srv.openai.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 40, temperature: 1 });

  it('q8_0: finish_reason "stop" after few tokens (legacy completions)', async () => {
    const c = await ask(q8);
    expect(c.choices[0]!.finish_reason).toBe('stop');
    expect(c.usage!.completion_tokens).toBeLessThanOrEqual(FEW);
  });

  it('plain: runs to max_tokens', async () => {
    const c = await ask(plain);
    expect(c.choices[0]!.finish_reason).toBe('length');
    expect(c.usage!.completion_tokens).toBe(40);
  });
});

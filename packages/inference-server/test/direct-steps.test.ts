/**
 * Direct steps in the server (src/engine-step.ts): a plain answer alone on the model steps
 * straight to it; when a second completion starts meanwhile, both go through node-llama-cpp's
 * batch queue, and each answers what it answers alone (greedy), the first one's text unbroken by
 * the switch.
 */
import { describe, expect, it } from '@jest/globals';
import {
  BIG_CONTEXT,
  chat,
  openaiClient,
  request,
  SseCompletion,
  serveTiny,
  tinyModel,
  withServer,
} from './helpers.js';

const { model: MODEL } = tinyModel();

/** The text a stream of chat completion chunks carries. */
const streamedText = (events: string[]) =>
  events
    .filter((e) => e !== '[DONE]')
    .map((e) => (JSON.parse(e) as { choices: { delta?: { content?: string } }[] }).choices[0]?.delta?.content ?? '')
    .join('');

describe('direct steps', () => {
  it('alone: steps go direct; with a second completion: batched, and both answer as alone', async () => {
    await withServer(serveTiny(MODEL, ['--parallel', '2', '--state-cache-mib', '0', ...BIG_CONTEXT]), async (s) => {
      const client = openaiClient(s.http!);
      const steps = async () =>
        Number(
          /^inference_direct_steps_total (\d+)$/m.exec((await request(s.http!, { path: '/metrics' })).text)?.[1] ?? NaN,
        );
      const long = chat('tell me about the river', { max_tokens: 1500, temperature: 0 });
      const short = { ...chat('and the stone?'), max_tokens: 40, temperature: 0 };
      const ask = async (body: typeof short) =>
        (await client.chat.completions.create(body)).choices[0]!.message.content;

      const s0 = await steps();
      expect(s0).toBe(0);
      const longAlone = await SseCompletion.open(s.http!, long);
      await longAlone.waitEnd(60_000);
      const aloneText = streamedText(longAlone.events);
      const s1 = await steps();
      const shortAlone = await ask(short);
      const s2 = await steps();
      // Alone, every step after the prompt's went direct.
      const longTokens = longAlone.events.length - 3; // less the role chunk, the final chunk and [DONE]
      expect(s1 - s0).toBeGreaterThan(longTokens / 2);
      expect(s2 - s1).toBeGreaterThan(20);

      // The same two at once: the short one starts while the long one streams.
      const together = await SseCompletion.open(s.http!, long);
      await together.waitFor(5);
      const shortTogether = await ask(short);
      expect(together.ended).toBe(false); // the short one ran entirely beside it
      await together.waitEnd(60_000);
      const s3 = await steps();
      expect(shortTogether).toBe(shortAlone);
      expect(streamedText(together.events)).toBe(aloneText);
      // Fewer direct steps than the two took alone: the short one's, and the long one's beside it, were batched.
      expect(s3 - s2).toBeLessThan(s2 - s0 - 20);
    });
  }, 120_000);
});

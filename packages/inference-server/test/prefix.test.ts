/**
 * Prompt-prefix reuse: the slot choice (pure, table-driven), and on the generated tiny model as a
 * real process through the official client: cached tokens in usage, the access log and /metrics;
 * the same text whether a prompt's prefix was cached, restored from a saved state or evaluated
 * cold (temperature 0, and a seed); a conversation evicted from the only slot and resumed; the
 * saved-state cache within its bound.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import type OpenAI from 'openai';
import { until } from '../../../test/support.js';
import { installAdaptiveThreads } from '../src/adaptive-threads.js';
import {
  chooseSlot,
  chooseWaiter,
  commonPrefix,
  isPrefixHit,
  MAX_PASSED_OVER,
  Scheduler,
  type SlotView,
  type WaiterView,
} from '../src/index.js';
import {
  openaiClient,
  readLines,
  request,
  SseCompletion,
  serveTiny,
  tinyModel,
  tmpDir,
  waitBusy,
  waitHealthy,
} from './helpers.js';

const { dir, model: MODEL } = tinyModel();

describe('slot choice', () => {
  const v = (slot: number, matched: number, lastUsed: number): SlotView => ({ slot, matched, lastUsed });
  it.each([
    ['the longest shared prefix wins', [v(0, 10, 1), v(1, 80, 2), v(2, 40, 3)], 100, 1],
    ['equal prefixes: the least recently used', [v(0, 50, 7), v(1, 50, 3)], 100, 1],
    ['no prefix: the least recently used', [v(0, 0, 5), v(1, 0, 2), v(2, 0, 9)], 100, 1],
    ['a slot never used counts as least recently used', [v(0, 0, 4), v(1, 0, 0)], 100, 1],
    ['a prefix under 10% of the prompt is no match: LRU', [v(0, 9, 1), v(1, 5, 8)], 100, 0],
    ['a prefix under 10% does not beat an empty slot', [v(0, 9, 8), v(1, 0, 0)], 100, 1],
    ['10% of the prompt is a match', [v(0, 10, 8), v(1, 0, 1)], 100, 0],
    ['one free slot', [v(3, 0, 9)], 100, 3],
    ['equal in all: the lowest slot', [v(2, 0, 0), v(1, 0, 0)], 100, 1],
  ])('%s', (_why, free, promptLength, expected) => {
    expect(chooseSlot(free, promptLength)?.slot).toBe(expected);
  });

  it('has no choice without free slots; counts common prefixes', () => {
    expect(chooseSlot([], 10)).toBeUndefined();
    expect(commonPrefix([1, 2, 3, 4], [1, 2, 9])).toBe(2);
    expect(commonPrefix([], [1])).toBe(0);
    expect(commonPrefix([5, 6], [5, 6])).toBe(2);
    expect(isPrefixHit(0, 0)).toBe(false);
  });

  it('the scheduler hands out by prefix, else least recently used', async () => {
    const s = new Scheduler(3, 4);
    const never = new AbortController().signal;
    const first = [await s.acquire(never), await s.acquire(never), await s.acquire(never)];
    expect(first).toEqual([0, 1, 2]);
    for (const slot of [1, 0, 2]) s.release(slot);
    // Slot 2 holds this prompt's prefix.
    expect(await s.acquire(never, (slot) => (slot === 2 ? 60 : 0), 100)).toBe(2);
    // No prefix anywhere: slot 0, handed out before slot 1.
    expect(await s.acquire(never, () => 0, 100)).toBe(0);
    s.release(0);
    s.release(2);
    expect(await s.acquire(never)).toBe(1);
  });
});

describe('who gets a slot given back', () => {
  const w = (matched: number, passedOver = 0, promptLength = 100): WaiterView => ({
    matched,
    promptLength,
    passedOver,
  });
  it.each([
    ['nobody waits', [], -1],
    ['the waiter whose prompt the slot holds, not the first', [w(0), w(0), w(80)], 2],
    ['the longest prefix of several', [w(20), w(90), w(50)], 1],
    ['equal prefixes: the one waiting longest', [w(0), w(40), w(40)], 1],
    ['no useful prefix anywhere: the first', [w(0), w(5), w(9)], 0],
    ['a prefix under 10% of its prompt does not count', [w(0), w(9, 0, 100)], 0],
    ['the first passed over fewer times than the bound still yields', [w(0, MAX_PASSED_OVER - 1), w(80)], 1],
    ['the first passed over the bound times gets it, whatever matches', [w(0, MAX_PASSED_OVER), w(80)], 0],
    ['one waiter', [w(0, 0)], 0],
  ])('%s', (_why, waiters, expected) => {
    expect(chooseWaiter(waiters)).toBe(expected);
  });

  it('the scheduler gives a freed slot to the matching waiter, and the first waiter after the bound', async () => {
    const s = new Scheduler(1, 16);
    const never = new AbortController().signal;
    expect(await s.acquire(never)).toBe(0);
    const order: string[] = [];
    const wait = (name: string, matches: boolean) =>
      s
        .acquire(never, () => (matches ? 50 : 0), 100)
        .then((slot) => {
          order.push(name);
          return slot;
        });
    const first = wait('newcomer', false);
    const turns: Promise<number>[] = [];
    for (let i = 0; i <= MAX_PASSED_OVER; i++) turns.push(wait(`turn ${i}`, true));
    // Each slot given back goes to a waiting turn of the slot's conversation, until the newcomer
    // was passed over MAX_PASSED_OVER times; then the newcomer gets it.
    for (let i = 0; i <= MAX_PASSED_OVER; i++) {
      s.release(0);
      await Promise.race([first, ...turns]);
      await new Promise((r) => setImmediate(r));
    }
    expect(order).toEqual([...Array.from({ length: MAX_PASSED_OVER }, (_, i) => `turn ${i}`), 'newcomer']);
    s.release(0);
    await turns[MAX_PASSED_OVER];
    expect(order.at(-1)).toBe(`turn ${MAX_PASSED_OVER}`);
    expect(s.waiting).toBe(0);
  });

  it('a prefix that cannot be read counts as none: the slot still goes to the first waiter', async () => {
    const s = new Scheduler(1, 4);
    const never = new AbortController().signal;
    expect(await s.acquire(never)).toBe(0);
    const first = s.acquire(
      never,
      () => {
        throw new Error('the sequence is disposed');
      },
      100,
    );
    const second = s.acquire(never, () => 0, 100);
    expect(() => s.release(0)).not.toThrow();
    expect(await first).toBe(0);
    expect(s.waiting).toBe(1);
    s.rejectAll(new Error('stop'));
    await expect(second).rejects.toThrow('stop');
  });
});

describe('threads during prompt evaluation', () => {
  it('each batch gets the threads its token count asks for (a prompt: --batch-threads; one step: --threads)', () => {
    const calls: string[] = [];
    class Native {
      initBatch(size: number) {
        calls.push(`init ${size}`);
      }
      addToBatch(seq: number, _first: number, tokens: Uint32Array) {
        calls.push(`add ${seq} ${tokens.length}`);
        return new Uint32Array(0);
      }
      setThreads(n: number) {
        calls.push(`threads ${n}`);
      }
    }
    const native = new Native();
    const picked: number[] = [];
    const ok = installAdaptiveThreads({ _ctx: native } as never, (tokens) => {
      picked.push(tokens);
      return tokens >= 3 ? 2 : 1;
    });
    expect(ok).toBe(true);
    // A prompt of 300 tokens, then one generated token, then two sequences' steps.
    native.initBatch(512);
    native.addToBatch(0, 0, new Uint32Array(300));
    native.setThreads(1);
    native.initBatch(512);
    native.addToBatch(0, 300, new Uint32Array(1));
    native.setThreads(1);
    native.initBatch(512);
    native.addToBatch(0, 301, new Uint32Array(1));
    native.addToBatch(1, 40, new Uint32Array(1));
    native.setThreads(1);
    expect(picked).toEqual([300, 1, 2]);
    expect(calls.filter((c) => c.startsWith('threads'))).toEqual(['threads 2', 'threads 1', 'threads 1']);
    expect(calls).toContain('add 1 1');
    expect(installAdaptiveThreads({ _ctx: {} } as never, () => 1)).toBe(false);
  });
});

/** A few sentences of the tiny model's words: one turn of a conversation. */
function turn(seed: number, words = 60): string {
  const vocab = 'the river stone cloud green blue house tree open close start stop good new old great little'.split(
    ' ',
  );
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(vocab[(seed * 7 + i * 13 + ((i * i) % 5)) % vocab.length]!);
  return out.join(' ');
}

type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type Usage = OpenAI.Completions.CompletionUsage;

async function ask(client: OpenAI, messages: Msg[], extra: Record<string, unknown> = {}) {
  const r = await client.chat.completions.create({
    model: 'tiny',
    messages,
    max_tokens: 12,
    temperature: 0,
    ...extra,
  } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
  return { text: r.choices[0]!.message.content ?? '', usage: r.usage as Usage };
}

const cached = (u: Usage) => u.prompt_tokens_details?.cached_tokens ?? -1;

/** Conversation `c` up to turn `n` (user turns, and the answers given so far). */
function conversation(c: number, answers: string[]): Msg[] {
  const m: Msg[] = [{ role: 'system', content: `You are helper number ${c}. ${turn(100 + c, 20)}` }];
  for (const [i, a] of answers.entries()) {
    m.push({ role: 'user', content: turn(c * 10 + i) }, { role: 'assistant', content: a });
  }
  m.push({ role: 'user', content: turn(c * 10 + answers.length) });
  return m;
}

/** The text a fresh server (nothing cached, no saved states) answers. */
async function cold(prompts: Msg[][], extra: Record<string, unknown> = {}): Promise<string[]> {
  const s = await serveTiny(MODEL, ['--parallel', '1', '--state-cache-mib', '0']);
  try {
    await waitHealthy(s.http!);
    const client = openaiClient(s.http!);
    const out: string[] = [];
    for (const p of prompts) {
      // A different conversation first, so that nothing of `p` is in the slot.
      await ask(client, conversation(99, []));
      const r = await ask(client, p, extra);
      expect(cached(r.usage)).toBeLessThan(r.usage.prompt_tokens / 10);
      out.push(r.text);
    }
    return out;
  } finally {
    s.child.kill('SIGKILL');
  }
}

describe('prefix reuse on the tiny model', () => {
  it('two conversations interleaved on two slots reuse their prefix; usage, log and metrics say so; cold gives the same text', async () => {
    const log = join(dir, 'access-interleaved.log');
    const s = await serveTiny(MODEL, ['--parallel', '2', '--state-cache-mib', '0', '--access-log', log]);
    const finals: Msg[][] = [];
    const warm: string[] = [];
    const seeded: string[] = [];
    try {
      await waitHealthy(s.http!);
      const client = openaiClient(s.http!);
      const answers: string[][] = [[], []];
      const previous = [0, 0];
      for (let t = 0; t < 4; t++) {
        for (const c of [0, 1]) {
          const r = await ask(client, conversation(c, answers[c]!));
          if (t === 0) expect(cached(r.usage)).toBe(0);
          // Every turn after the first reuses the whole previous prompt (and more).
          else expect(cached(r.usage)).toBeGreaterThanOrEqual(previous[c]!);
          previous[c] = r.usage.prompt_tokens;
          if (t === 3) {
            finals.push(conversation(c, answers[c]!));
            warm.push(r.text);
          } else answers[c]!.push(r.text);
        }
      }
      // The same final prompt again: all of it but the last token is cached; a seed too.
      const again = await ask(client, finals[0]!);
      expect(cached(again.usage)).toBe(again.usage.prompt_tokens - 1);
      expect(again.text).toBe(warm[0]);
      for (const p of finals) seeded.push((await ask(client, p, { temperature: 0.9, seed: 42 })).text);

      const metrics = (await request(s.http!, { path: '/metrics' })).text;
      const counter = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1]);
      expect(counter('inference_prompt_tokens_cached_total')).toBeGreaterThan(
        counter('inference_prompt_tokens_evaluated_total'),
      );
      expect(metrics).toMatch(/^inference_slot_prefix_total\{result="miss"\} 2$/m);
      expect(metrics).toMatch(/^inference_slot_prefix_total\{result="hit"\} 9$/m);
      const lines = readLines(log).filter((l) => l.msg === 'request completed');
      expect(lines).toHaveLength(11);
      expect(lines[0]!.cached_tokens).toBe(0);
      expect(lines[8]!.cached_tokens).toBe(again.usage.prompt_tokens - 1);
    } finally {
      s.child.kill('SIGKILL');
    }
    expect(await cold(finals)).toEqual(warm);
    expect(await cold(finals, { temperature: 0.9, seed: 42 })).toEqual(seeded);
  }, 120_000);

  it('a slot given back goes to the queued next turn of its conversation before a newcomer queued earlier', async () => {
    const log = join(dir, 'access-queue.log');
    const s = await serveTiny(MODEL, ['--parallel', '1', '--state-cache-mib', '0', '--access-log', log]);
    try {
      await waitHealthy(s.http!);
      const client = openaiClient(s.http!);
      const depth = async () =>
        Number(/^inference_queue_depth (\d+)$/m.exec((await request(s.http!, { path: '/metrics' })).text)?.[1]);
      const waitDepth = async (n: number) => {
        const deadline = Date.now() + 20_000;
        while ((await depth()) < n) {
          if (Date.now() > deadline) throw new Error(`the queue did not reach ${n}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      // Conversation 0's first turn holds the only slot (a long generation, ended by its client).
      const first = conversation(0, []);
      const holder = await SseCompletion.open(s.http!, { model: 'tiny', messages: first, max_tokens: 30_000 });
      await waitBusy(s.http!, 1);
      const newcomer = ask(client, conversation(7, []));
      await waitDepth(1);
      const next = ask(client, [...first, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'and?' }]);
      await waitDepth(2);
      holder.close();
      const [n, c] = await Promise.all([next, newcomer]);
      // The next turn found its conversation in the slot; the newcomer came after it.
      expect(cached(n.usage)).toBeGreaterThan(n.usage.prompt_tokens / 2);
      expect(cached(c.usage)).toBeLessThan(c.usage.prompt_tokens / 10);
      // The log line of a request is written after its answer: wait for both.
      const completed = () => readLines(log).filter((l) => l.msg === 'request completed');
      await until('both requests logged', () => completed().length >= 2);
      expect(completed().map((l) => l.cached_tokens)).toEqual([cached(n.usage), cached(c.usage)]);
    } finally {
      s.child.kill('SIGKILL');
    }
  }, 120_000);

  it('a conversation evicted from the only slot is restored from its saved state and answers as cold', async () => {
    const s = await serveTiny(MODEL, ['--parallel', '1', '--state-cache-mib', '4']);
    const finals: Msg[][] = [];
    const warm: string[] = [];
    try {
      await waitHealthy(s.http!);
      const client = openaiClient(s.http!);
      const answers: string[][] = [[], [], []];
      const previous = [0, 0, 0];
      for (let t = 0; t < 3; t++) {
        for (const c of [0, 1, 2]) {
          const r = await ask(client, conversation(c, answers[c]!));
          // From the second turn on, the conversation comes back from its saved state.
          if (t > 0) expect(cached(r.usage)).toBeGreaterThanOrEqual(previous[c]!);
          previous[c] = r.usage.prompt_tokens;
          if (t === 2) {
            finals.push(conversation(c, answers[c]!));
            warm.push(r.text);
          } else answers[c]!.push(r.text);
        }
      }
      const metrics = (await request(s.http!, { path: '/metrics' })).text;
      expect(metrics).toMatch(/^inference_state_restores_total 6$/m);
      expect(metrics).toMatch(/^inference_slot_prefix_total\{result="hit"\} 8$/m);
    } finally {
      s.child.kill('SIGKILL');
    }
    expect(await cold(finals)).toEqual(warm);
  }, 120_000);

  it('the saved states never exceed --state-cache-mib: the oldest go', async () => {
    const states = tmpDir('vigil-states-');
    const s = await serveTiny(MODEL, ['--parallel', '1', '--state-cache-mib', '1', '--state-cache-dir', states.dir]);
    let biggest = 0;
    try {
      await waitHealthy(s.http!);
      const client = openaiClient(s.http!);
      const answers: string[][] = [[], [], [], [], [], []];
      for (let t = 0; t < 2; t++) {
        for (let c = 0; c < answers.length; c++) {
          answers[c]!.push((await ask(client, conversation(c, answers[c]!))).text);
          const files = readdirSync(states.dir, { recursive: true, withFileTypes: true }).filter((f) => f.isFile());
          const bytes = files.reduce((n, f) => n + statSync(join(f.parentPath ?? f.path, f.name)).size, 0);
          biggest = Math.max(biggest, bytes);
        }
      }
      const metrics = (await request(s.http!, { path: '/metrics' })).text;
      const gauge = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1]);
      expect(gauge('inference_state_cache_bytes')).toBeLessThanOrEqual(1024 * 1024);
      expect(gauge('inference_state_cache_limit_bytes')).toBe(1024 * 1024);
      expect(gauge('inference_state_evictions_total')).toBeGreaterThan(0);
      expect(gauge('inference_state_saves_total')).toBeGreaterThan(6);
    } finally {
      s.child.kill('SIGKILL');
      states.cleanup();
    }
    expect(biggest).toBeGreaterThan(512 * 1024);
    expect(biggest).toBeLessThanOrEqual(1024 * 1024);
  }, 120_000);
});

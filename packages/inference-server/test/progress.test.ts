/**
 * Progress per slot (issue 30): the pure bookkeeping, then the server as a real process on the
 * tiny model with a fake NOTIFY_SOCKET: READY=1 and WATCHDOG=1 at the rate WATCHDOG_USEC asks
 * for, none while the process is stopped (SIGSTOP); a model that stops working (spec 3.4: libuv's pool
 * stopped with ptrace by bench/hang-threads.py, the listener still answering) is reported stalled
 * in /health and /metrics, logged once, and its watchdog is triggered and no longer fed; a long
 * healthy generation is never reported stalled and its watchdog beats on.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { expectWatchdogLifecycle } from '../../../test/notify-lifecycle.js';
import { type FakeNotifySocket, fakeNotifySocket, watchdogTimes } from '../../../test/notify-socket.js';
import { until } from '../../../test/support.js';
import { ProgressTracker } from '../src/progress.js';
import {
  BIG_CONTEXT,
  chat,
  exited,
  request,
  type ServerProcess,
  SseCompletion,
  serveTiny,
  tinyModel,
  waitHealthy,
} from './helpers.js';

const { model: MODEL } = tinyModel();
const HANG = fileURLToPath(new URL('../../../bench/hang-threads.py', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ProgressTracker', () => {
  const t = new ProgressTracker({ stallAfterMs: 10_000, minPromptRate: 100 });
  it.each([
    // [what, prompt tokens, tokens produced, ms since the last progress, stalled]
    ['a generating slot within the bound', 50, 3, 9_999, false],
    ['a generating slot past the bound', 50, 3, 10_001, true],
    ['a short prompt: about the same bound', 50, 0, 10_400, false],
    ['a short prompt past it', 50, 0, 10_600, true],
    ['a long prompt (4,000 tokens: +40 s) at 45 s', 4000, 0, 45_000, false],
    ['a long prompt past 50 s', 4000, 0, 50_001, true],
    ['after its first token the long prompt no longer counts', 4000, 1, 10_001, true],
  ])('%s', (_what, prompt, tokens, idleMs, stalled) => {
    const tr = new ProgressTracker(t.options);
    tr.begin(0, prompt, 1_000);
    for (let i = 0; i < tokens; i++) tr.progress(0, 1_000);
    const r = tr.report(1_000 + idleMs);
    expect(r.stalled).toBe(stalled ? 1 : 0);
    expect(r.reason === null).toBe(!stalled);
    expect(r.in_flight).toBe(1);
  });

  it('a slot waiting while another evaluates its long prompt is not stalled, until that prompt is past its bound', () => {
    // Slot 1 (generating) got no token for 30 s: the model's batches were slot 0's 4,000-token
    // prompt (bound 10 s + 40 s).
    const tr = new ProgressTracker({ stallAfterMs: 10_000, minPromptRate: 100 });
    tr.begin(1, 20, 0);
    tr.progress(1, 1_000);
    tr.begin(0, 4000, 1_000);
    expect(tr.report(31_000)).toMatchObject({ in_flight: 2, stalled: 0, reason: null });
    // Past slot 0's bound, both are stalled: the model is not working.
    const r = tr.report(51_001);
    expect(r.stalled).toBe(2);
    expect(r.reason).toMatch(/^slot 1 has made no progress for 50 s \(generating; 2 of 2 slots stalled\)$/);
    // Once slot 0 produces its first token, slot 1's own bound counts again.
    tr.progress(0, 31_000);
    expect(tr.report(31_000)).toMatchObject({ stalled: 1, reason: expect.stringMatching(/^slot 1 /) });
  });

  it('time spent waiting for the CPU (excused) does not count towards the bound; since_progress_s still does', () => {
    const tr = new ProgressTracker({ stallAfterMs: 10_000, minPromptRate: 100 });
    tr.begin(0, 20, 0);
    tr.progress(0, 1_000);
    // The host's other work held the CPU from 5 s to 9 s: the bound counts from 9 s.
    for (let at = 5_000; at <= 9_000; at += 1_000) tr.cpuWait({ waited: true, episode: true }, at);
    expect(tr.report(9_500).waiting_for_cpu).toBe(true);
    expect(tr.report(18_000)).toMatchObject({ stalled: 0, reason: null, since_progress_s: 17 });
    const r = tr.report(19_001);
    expect(r.stalled).toBe(1);
    // The reason says how long since the slot really moved.
    expect(r.reason).toMatch(/^slot 0 has made no progress for 18 s /);
    // A slot that begins after an excuse is not moved back by it.
    tr.begin(1, 20, 30_000);
    tr.cpuWait({ waited: true, episode: true }, 20_000);
    // A calm second within the episode excuses nothing; the episode's end clears the report's flag.
    tr.cpuWait({ waited: false, episode: true }, 40_000);
    expect(tr.report(40_300)).toMatchObject({ stalled: 2, waiting_for_cpu: true });
    tr.cpuWait({ waited: false, episode: false }, 40_300);
    expect(tr.report(40_300).stalled).toBe(2);
  });

  it('reports in flight, the oldest age and the latest progress of any slot; an ended slot is gone', () => {
    const tr = new ProgressTracker({ stallAfterMs: 10_000, minPromptRate: 100 });
    expect(tr.report(0)).toEqual({
      in_flight: 0,
      oldest_age_s: 0,
      since_progress_s: null,
      stalled: 0,
      reason: null,
      waiting_for_cpu: false,
    });
    tr.begin(0, 10, 1_000);
    tr.begin(1, 10, 3_000);
    tr.progress(0, 4_000);
    tr.progress(1, 2_000 + 3_000);
    expect(tr.report(6_000)).toMatchObject({ in_flight: 2, oldest_age_s: 5, since_progress_s: 1, stalled: 0 });
    tr.progress(1, 20_000);
    const r = tr.report(20_000);
    expect(r).toMatchObject({ stalled: 1, since_progress_s: 0 });
    expect(r.reason).toMatch(/^slot 0 has made no progress for 16 s \(generating; 1 of 2 slots stalled\)$/);
    tr.end(0);
    expect(tr.report(20_000)).toMatchObject({ in_flight: 1, stalled: 0, reason: null });
  });
});

describe('a stalled model, and a long healthy one, as a real process', () => {
  let sock: FakeNotifySocket | null = null;
  let server: ServerProcess | null = null;
  let hang: ChildProcess | null = null;
  afterEach(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await exited(server.child);
    }
    if (hang && hang.exitCode === null) hang.kill('SIGKILL');
    sock?.close();
    sock = server = hang = null;
  });

  const start = async (stallAfterS: string) => {
    sock = await fakeNotifySocket();
    server = await serveTiny(MODEL, [...BIG_CONTEXT, '--parallel', '1', '--stall-after', stallAfterS], {
      NOTIFY_SOCKET: sock.path,
      WATCHDOG_USEC: '1000000',
    });
    await waitHealthy(server.http!);
    await until('STATUS=serving', () => sock!.messages.some((m) => m.m === 'STATUS=serving'), 20_000);
    return { s: server, n: sock };
  };

  it('READY=1, WATCHDOG=1 every half period while its loop turns, none while stopped, STOPPING=1 on SIGTERM', async () => {
    // The same lifecycle as the relay's, daemon's and guardian's (test/watchdog.test.ts).
    const { s, n } = await start('2');
    await expectWatchdogLifecycle(n, s.child, 1000);
    const names = n.messages.map((m) => m.m);
    // READY=1 once the listeners answer, while the model loads; once loaded, only STATUS= changes.
    expect(names.indexOf('STATUS=loading the model')).toBeGreaterThan(-1);
    expect(names.indexOf('STATUS=serving')).toBeGreaterThan(names.indexOf('STATUS=loading the model'));
    expect(names.filter((m) => m === 'READY=1')).toHaveLength(1);
    s.child.kill('SIGTERM');
    expect(await exited(s.child)).toEqual({ code: 0, signal: null });
    await until('STOPPING=1', () => n.messages.some((m) => m.m === 'STOPPING=1'));
  }, 60_000);

  it('reports a stall (503, metrics, one log line), triggers the watchdog and stops feeding it', async () => {
    const { s, n } = await start('2');
    hang = spawn('python3', [HANG, String(s.child.pid), '120'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    hang.stdout!.on('data', (d: Buffer) => {
      out += d;
    });
    await until('the pool threads to be stopped', () => out.includes('frozen') || hang!.exitCode !== null, 20_000);
    expect(out).toContain('frozen');
    const sse = await SseCompletion.open(s.http!, chat('hello', { max_tokens: 50 }));
    let health = await request(s.http!, { path: '/health' });
    expect(health.status).toBe(200);
    expect(health.json().progress).toMatchObject({ in_flight: 1, stalled: 0 });
    await until(
      'a 503 "stalled"',
      async () => {
        health = await request(s.http!, { path: '/health' });
        return health.status === 503;
      },
      20_000,
    );
    expect(health.json()).toMatchObject({
      status: 'stalled',
      reason: expect.stringMatching(/^slot 0 has made no progress for [\d.]+ s \(evaluating its prompt; 1 of 1/),
      progress: { in_flight: 1, stalled: 1 },
    });
    // The listener still answers; only the model has stopped.
    expect((await request(s.http!, { path: '/v1/models' })).status).toBe(200);
    const metrics = (await request(s.http!, { path: '/metrics' })).text;
    expect(metrics).toMatch(/^inference_stalled_sequences 1$/m);
    expect(metrics).toMatch(/^inference_in_flight_completions 1$/m);
    await until('WATCHDOG=trigger', () => n.messages.some((m) => m.m === 'WATCHDOG=trigger'));
    const beats = watchdogTimes(n).length;
    await sleep(3000);
    expect(watchdogTimes(n).length).toBe(beats);
    expect(n.messages.some((m) => m.m.startsWith('STATUS=slot 0 has made no progress'))).toBe(true);
    expect(
      s
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"stalled"')),
    ).toHaveLength(1);
    sse.close();
  }, 60_000);

  it('a long healthy generation (2,000 tokens) is never stalled, and its watchdog beats on', async () => {
    const { s, n } = await start('1');
    const before = watchdogTimes(n).length;
    const sse = await SseCompletion.open(
      s.http!,
      chat('hello', { max_tokens: 2000, temperature: 0, stream_options: { include_usage: true } }),
    );
    const statuses = new Set<number>();
    const t0 = Date.now();
    while (!sse.ended) {
      statuses.add((await request(s.http!, { path: '/health' })).status);
      await sleep(100);
    }
    const seconds = (Date.now() - t0) / 1000;
    expect([...statuses]).toEqual([200]);
    const last = JSON.parse(sse.events[sse.events.length - 2]!);
    expect(last.usage.completion_tokens).toBe(2000);
    expect(s.output()).not.toContain('"msg":"stalled"');
    expect(n.messages.some((m) => m.m === 'WATCHDOG=trigger')).toBe(false);
    if (seconds > 1.5) expect(watchdogTimes(n).length).toBeGreaterThan(before);
  });

  it('a long prompt (no token for seconds) is not stalled: its bound grows with its size', async () => {
    // --stall-after 0.5 s; the prompt's evaluation alone takes longer than that, and its share
    // of the bound (its tokens at 200 tokens/s: a generous allowance on a loaded host) covers it.
    sock = await fakeNotifySocket();
    server = await serveTiny(
      MODEL,
      [...BIG_CONTEXT, '--parallel', '1', '--stall-after', '0.5', '--min-prompt-rate', '200'],
      { NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '1000000' },
    );
    const s = server;
    await waitHealthy(s.http!);
    // About 30,000 tokens: its evaluation takes over a second, twice --stall-after and more, on
    // this model (20,000 took 0.7 s on a fast run: too close to the check below).
    const long = Array.from({ length: 4500 }, (_, i) => `word${i % 97}`).join(' ');
    const t0 = Date.now();
    const sse = await SseCompletion.open(s.http!, chat(long, { max_tokens: 3, temperature: 0 }));
    let firstTokenMs: number | null = null;
    const statuses = new Set<number>();
    while (!sse.ended) {
      if (firstTokenMs === null && sse.events.length > 1) firstTokenMs = Date.now() - t0;
      statuses.add((await request(s.http!, { path: '/health' })).status);
      await sleep(50);
    }
    firstTokenMs ??= Date.now() - t0;
    expect(firstTokenMs).toBeGreaterThan(700); // longer than --stall-after: the prompt's share mattered
    expect([...statuses]).toEqual([200]);
    expect(s.output()).not.toContain('"msg":"stalled"');
    expect(sock.messages.some((m) => m.m === 'WATCHDOG=trigger')).toBe(false);
  }, 90_000);
});

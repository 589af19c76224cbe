/**
 * `--worker-sched` and `--worker-nice` (Linux): the threads that run the model get the policy
 * (SCHED_IDLE by default) or the nice value, read back from /proc; the main thread (the event
 * loop: HTTP, /v1/models, the watchdog) keeps its own; and the compute threads that llama.cpp
 * creates for each decode inherit them. While other processes hold every core, the idle threads
 * wait, and the server says so and does not count it as a stall.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, getPriority } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { until } from '../../../test/support.js';
import { listThreads, type ThreadInfo } from '../src/worker-priority.js';
import {
  BIG_CONTEXT,
  chat,
  exited,
  makeTiny,
  request,
  type ServerProcess,
  SseCompletion,
  serveTiny,
  tinyModel,
} from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A thread's CPU time so far, ns (/proc schedstat): the tiny model's decodes over a few tokens,
 * spread over the pool's threads, can stay under one clock tick of /proc stat per thread.
 */
function runNs(pid: number, tid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return 0;
  }
}

const { model: MODEL, dir: DIR } = tinyModel();
/** The `small` model (98 M parameters): a step of it is work enough that a starved thread makes none. */
const SMALL = join(DIR, 'small.gguf');
beforeAll(() => makeTiny(SMALL, ['--preset', 'small']), 60_000);
/** The server inherits this process's nice value (0 unless the tests run niced). */
const BASE = getPriority();
/** Linux's scheduling policies as /proc shows them. */
const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

describe('--worker-sched and --worker-nice', () => {
  let server: ServerProcess | null = null;
  const hogs: ChildProcess[] = [];
  afterEach(async () => {
    for (const h of hogs.splice(0)) h.kill('SIGKILL');
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await exited(server.child);
    }
    server = null;
  });

  /**
   * A generation on the server (two threads for every decode: each one makes llama.cpp start a
   * compute thread of its own), watched from /proc: the main thread, the threads born while it
   * generates (llama.cpp's compute threads live for one decode; reading /proc often catches many
   * of them), and the thread that ran the decodes (the one, other than main, whose CPU time grew
   * most). Enough of it: some threads seen and some tokens out (the test does not wait for all).
   */
  async function generation(flags: string[], env: NodeJS.ProcessEnv = {}) {
    const threads = ['--parallel', '1', '--threads', '2', '--batch-threads', '2'];
    server = await serveTiny(MODEL, [...BIG_CONTEXT, ...threads, ...flags], env);
    const pid = server.child.pid!;
    const loaded = JSON.parse(await server.waitForLog('"msg":"model loaded"'));
    const before = new Map(listThreads(pid).map((t) => [t.tid, t]));
    const ranBefore = new Map([...before.keys()].map((tid) => [tid, runNs(pid, tid)]));
    const sse = await SseCompletion.open(server.http!, chat('hello', { max_tokens: 1500, temperature: 0 }));
    const born = new Map<number, ThreadInfo>();
    while (!sse.ended && (born.size < 3 || sse.events.length < 30)) {
      for (const t of listThreads(pid)) if (!before.has(t.tid)) born.set(t.tid, t);
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(sse.status).toBe(200);
    expect(sse.events.length).toBeGreaterThanOrEqual(30);
    sse.close();
    const after = listThreads(pid);
    const named = after.some((t) => t.name === 'libuv-worker');
    const grew = after
      // Where Node names its threads (22 and later), only the pool's are candidates: V8's helpers
      // and the grammar worker may use more CPU than any one of the pool threads the decodes are
      // spread over. Node 20 names none.
      .filter((t) => t.tid !== pid && before.has(t.tid) && (!named || t.name === 'libuv-worker'))
      .map((t) => ({ ...t, used: runNs(pid, t.tid) - ranBefore.get(t.tid)! }))
      .sort((a, b) => b.used - a.used);
    expect(grew[0]!.used).toBeGreaterThan(0);
    expect(born.size).toBeGreaterThan(0);
    return {
      loaded,
      main: [before.get(pid)!, after.find((t) => t.tid === pid)!],
      decoder: grew[0]!,
      born: [...born.values()],
      // Where Node names its threads (22 and later), V8's helpers are not the model's.
      v8: after.filter((x) => x.name.startsWith('V8')),
    };
  }

  it('--worker-nice: lowers the threads that run the model, and those they create, and leaves the main thread as it was', async () => {
    const g = await generation(['--worker-sched', 'normal', '--worker-nice', '7']);
    expect(g.loaded.workerThreadsLowered).toBeGreaterThan(0);
    expect(g.main.map((t) => t.nice)).toEqual([BASE, BASE]);
    expect(g.decoder.nice).toBe(7);
    for (const t of g.v8) expect(t.nice).toBe(BASE);
    expect([...new Set(g.born.map((t) => t.nice))]).toEqual([7]);
  }, 120_000);

  it('by default (idle): the threads that run the model are SCHED_IDLE, the main thread is not, and no nice value changes', async () => {
    // The test run chooses `normal` for every other test (scripts/test.mjs): not for this one.
    const g = await generation([], { INFERENCE_SERVER_WORKER_SCHED: undefined });
    expect(g.loaded.workerThreadsLowered).toBe(0);
    expect(g.loaded.workerThreadsIdle).toBeGreaterThan(0);
    // Which native binary runs the model is said at load: the npm package's, unless one was built here.
    expect(['prebuilt', 'localBuild']).toContain(g.loaded.llamaBuild);
    expect(g.main.map((t) => [t.policy, t.nice])).toEqual([
      [SCHED_OTHER, BASE],
      [SCHED_OTHER, BASE],
    ]);
    expect([g.decoder.policy, g.decoder.nice]).toEqual([SCHED_IDLE, BASE]);
    for (const t of g.v8) expect(t.policy).toBe(SCHED_OTHER);
    expect([...new Set(g.born.map((t) => t.policy))]).toEqual([SCHED_IDLE]);
  }, 120_000);

  it('idle threads waiting while other processes hold every core: logged once, not a stall; on again when the cores are free', async () => {
    // A stall after 2.5 s without progress (the wait is sampled every second); the prompt adds
    // nothing to that bound.
    server = await serveTiny(SMALL, [
      ...['--parallel', '1', '--threads', '1', '--batch-threads', '1', '--worker-sched', 'idle'],
      ...['--stall-after', '2.5', '--min-prompt-rate', '1000000'],
    ]);
    await server.waitForLog('"msg":"model loaded"');
    const sse = await SseCompletion.open(server.http!, chat('hello', { max_tokens: 100_000, temperature: 0 }));
    await until('tokens', () => sse.events.length > 5);
    // One busy loop per core, at the ordinary policy.
    for (let i = 0; i < availableParallelism(); i++) {
      hogs.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
    }
    const waiting = JSON.parse(await server.waitForLog('"msg":"generation waiting for CPU"', 15_000));
    expect(waiting).toMatchObject({ level: 'warn', policy: 'idle' });
    // Several times the stall bound: still healthy, and no stall logged. Alone on its host the
    // model gets no token out meanwhile (no progress for longer than the bound: without the
    // excuse /health answers 503, as measured); beside other busy tests the scheduler lets one
    // out now and then, so that is not asserted here (progress.test.ts pins the excuse itself).
    for (let i = 0; i < 7; i++) {
      await sleep(1_000);
      const health = await request(server.http!, { path: '/health' });
      expect(health.status).toBe(200);
      // After the first second of waiting, /health says so (what the guardian reads).
      expect(health.json().progress).toMatchObject({ in_flight: 1, stalled: 0, waiting_for_cpu: true });
    }
    expect((await request(server.http!, { path: '/metrics' })).text).toMatch(/^inference_waiting_for_cpu 1$/m);
    for (const h of hogs.splice(0)) h.kill('SIGKILL');
    // Three calm seconds in a row: beside the other test worker's processes on the same cores, the
    // idle threads may wait again for a while before they get them, so this wait is long.
    const again = JSON.parse(await server.waitForLog('"msg":"generation has CPU again"', 75_000));
    expect(again.waited_s).toBeGreaterThanOrEqual(5);
    expect((await request(server.http!, { path: '/health' })).json().progress.waiting_for_cpu).toBe(false);
    const seen = sse.events.length;
    await until('tokens again', () => sse.events.length > seen + 5);
    expect(server.output()).not.toContain('"msg":"stalled"');
    expect(server.output().match(/generation waiting for CPU/g)).toHaveLength(1);
    sse.close();
  }, 120_000);

  it('--worker-sched normal: every thread keeps the policy and nice value it started with', async () => {
    server = await serveTiny(MODEL, ['--parallel', '1', '--worker-sched', 'normal']);
    const loaded = JSON.parse(await server.waitForLog('"msg":"model loaded"'));
    expect(loaded).toMatchObject({ workerThreadsLowered: 0, workerThreadsIdle: 0 });
    const threads = listThreads(server.child.pid!);
    expect([...new Set(threads.map((t) => t.nice))]).toEqual([BASE]);
    expect([...new Set(threads.map((t) => t.policy))]).toEqual([SCHED_OTHER]);
  });
});

/**
 * `--worker-nice` (Linux): the threads that run the model get the nice value, read back from
 * /proc; the main thread (the event loop: HTTP, /v1/models, the watchdog) keeps 0; and the
 * compute threads that llama.cpp creates for each decode inherit the lowered value.
 */
import { getPriority } from 'node:os';
import { afterEach, describe, expect, it } from '@jest/globals';
import { listThreads, type ThreadInfo } from '../src/adaptive-threads.js';
import { BIG_CONTEXT, chat, exited, type ServerProcess, SseCompletion, serveTiny, tinyModel } from './helpers.js';

const { model: MODEL } = tinyModel();
/** The server inherits this process's nice value (0 unless the tests run niced). */
const BASE = getPriority();

describe('--worker-nice', () => {
  let server: ServerProcess | null = null;
  afterEach(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await exited(server.child);
    }
    server = null;
  });

  it('lowers the threads that run the model, and those they create, and leaves the main thread as it was', async () => {
    // Two threads for every decode: each one makes llama.cpp start a compute thread of its own.
    server = await serveTiny(MODEL, [
      ...BIG_CONTEXT,
      ...['--parallel', '1', '--threads', '2', '--batch-threads', '2', '--worker-nice', '7'],
    ]);
    const pid = server.child.pid!;
    const loaded = JSON.parse(await server.waitForLog('"msg":"model loaded"'));
    expect(loaded.workerThreadsLowered).toBeGreaterThan(0);
    const before = new Map(listThreads(pid).map((t) => [t.tid, t]));
    expect(before.get(pid)?.nice).toBe(BASE);

    const sse = await SseCompletion.open(server.http!, chat('hello', { max_tokens: 1500, temperature: 0 }));
    // Threads that appear while it generates: llama.cpp's compute threads (they live for one
    // decode; reading /proc often catches many of them).
    // Enough of it: some of them seen, and some tokens out (a niced generation on a busy host
    // is slow: the test does not wait for all of it).
    const born = new Map<number, ThreadInfo>();
    while (!sse.ended && (born.size < 3 || sse.events.length < 30)) {
      for (const t of listThreads(pid)) if (!before.has(t.tid)) born.set(t.tid, t);
      await new Promise((r) => setTimeout(r, 1));
    }
    expect(sse.status).toBe(200);
    expect(sse.events.length).toBeGreaterThanOrEqual(30);
    const after = listThreads(pid);
    expect(after.find((t) => t.tid === pid)?.nice).toBe(BASE);
    // The thread that ran the decodes: the one, other than main, whose CPU time grew most.
    const grew = after
      .filter((t) => t.tid !== pid && before.has(t.tid))
      .map((t) => ({ ...t, used: t.cpuTicks - before.get(t.tid)!.cpuTicks }))
      .sort((a, b) => b.used - a.used);
    expect(grew[0]!.used).toBeGreaterThan(0);
    expect(grew[0]!.nice).toBe(7);
    // Where Node names its threads (22 and later), V8's helpers are not the model's: left as they were.
    for (const t of after.filter((x) => x.name.startsWith('V8'))) expect(t.nice).toBe(BASE);
    expect(born.size).toBeGreaterThan(0);
    expect([...new Set([...born.values()].map((t) => t.nice))]).toEqual([7]);
    sse.close();
  }, 120_000);

  it('is off by default: every thread keeps the nice value it started with', async () => {
    server = await serveTiny(MODEL, ['--parallel', '1']);
    const loaded = JSON.parse(await server.waitForLog('"msg":"model loaded"'));
    expect(loaded.workerThreadsLowered).toBe(0);
    // Which native binary runs the model is said at load: the npm package's, unless one was built here.
    expect(['prebuilt', 'localBuild']).toContain(loaded.llamaBuild);
    expect([...new Set(listThreads(server.child.pid!).map((t) => t.nice))]).toEqual([BASE]);
  });
});

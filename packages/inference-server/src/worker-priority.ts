/**
 * The scheduling of the threads that run the model (Linux). node-llama-cpp decodes on libuv's
 * thread pool, and llama.cpp's compute threads are created by the pool thread that runs a decode
 * and inherit its policy and nice value. The event loop (HTTP, /v1/models, the watchdog) keeps
 * the main thread's.
 *
 * - `--worker-sched idle` (the default): the model's threads are SCHED_IDLE. They take every CPU
 *   that nothing else wants, and give it up the moment another thread of the host (the event
 *   loop first) wakes: a liveness probe does not wait behind a generation. Measured on 2 cores
 *   with as many threads as cores, this also makes generation faster (bench/model-list.bench.mjs).
 * - `--worker-sched normal`: ordinary threads (SCHED_OTHER), with `--worker-nice N` a lower
 *   priority among them.
 *
 * The cost of idle: while other processes keep every core busy, the model waits for them. That is
 * not a hang; the server sees it in the run-queue wait of its idle threads (/proc schedstat) and
 * does not count that time towards a stall (CpuWaitWatch; progress.ts `cpuWait`).
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { promisify } from 'node:util';
import type { WorkerSched } from './options.js';

const execFileAsync = promisify(execFile);

/** Linux's number for SCHED_IDLE (sched.h), as /proc/PID/task/TID/stat field 41 shows it. */
const SCHED_IDLE = 5;

/** A thread of a process (Linux /proc/PID/task): its id, name, nice value, policy and CPU time. */
export interface ThreadInfo {
  readonly tid: number;
  readonly name: string;
  readonly nice: number;
  /** Scheduling policy (0 SCHED_OTHER, 3 SCHED_BATCH, 5 SCHED_IDLE…). */
  readonly policy: number;
  /** User + system CPU time so far, in clock ticks. */
  readonly cpuTicks: number;
}

/** The threads of process `pid` (default: this one); [] where /proc is not there. */
export function listThreads(pid: number | 'self' = 'self'): ThreadInfo[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return []; // not Linux
  }
  const threads: ThreadInfo[] = [];
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // "tid (name) state ppid …": the name may hold spaces and parentheses; utime, stime, nice
      // and policy (fields 14, 15, 19, 41) are 11, 12, 16 and 38 places after the state (field 3).
      const close = stat.lastIndexOf(')');
      const f = stat.slice(close + 2).split(' ');
      const name = stat.slice(stat.indexOf('(') + 1, close);
      const cpuTicks = Number(f[11]) + Number(f[12]);
      threads.push({ tid: Number(tid), name, nice: Number(f[16]), policy: Number(f[38]), cpuTicks });
    } catch {
      // a thread that ended meanwhile
    }
  }
  return threads;
}

/** libuv's name for its thread-pool threads (Node 22 and later; Node 20 names no thread). */
const POOL_THREAD = 'libuv-worker';

/**
 * The threads that run the model: where Node names its threads (22 and later), the pool's (V8's
 * helpers are not the model's); on Node 20, which names none, every thread but the main one.
 */
function workerThreads(): ThreadInfo[] {
  const threads = listThreads();
  const named = threads.some((t) => t.name === POOL_THREAD);
  return threads.filter((t) => t.tid !== process.pid && (!named || t.name === POOL_THREAD));
}

export interface WorkerPriority {
  /** Threads given the nice value. */
  readonly lowered: number;
  /** Threads made SCHED_IDLE. */
  readonly idle: number;
  /** Why idle was asked for and not applied (no `chrt`, not Linux), or null. */
  readonly idleRefused: string | null;
}

/**
 * Applies `--worker-sched` and `--worker-nice` to the threads that run the model. Call it once
 * the model is loaded (the pool exists then). `chrt` (util-linux) sets the policy: Node has no
 * call for it. Elsewhere than Linux nothing is done.
 */
export async function applyWorkerPriority(sched: WorkerSched, nice: number): Promise<WorkerPriority> {
  const threads = workerThreads();
  if (threads.length === 0) return { lowered: 0, idle: 0, idleRefused: sched === 'idle' ? 'not Linux' : null };
  let lowered = 0;
  for (const t of threads) {
    try {
      if (nice > 0) {
        setPriority(t.tid, Math.min(19, nice));
        lowered++;
      }
    } catch {
      // a thread that ended meanwhile, or not permitted
    }
  }
  if (sched !== 'idle') return { lowered, idle: 0, idleRefused: null };
  // One `chrt` per thread, side by side: the event loop does not wait for them.
  const outcomes = await Promise.all(
    threads.map((t) =>
      execFileAsync('chrt', ['--idle', '--pid', '0', String(t.tid)], { timeout: 5000 }).then(
        () => 'ok' as const,
        (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? ('missing' as const) : ('gone' as const)),
      ),
    ),
  );
  const idle = outcomes.filter((o) => o === 'ok').length;
  const idleRefused = outcomes.includes('missing') ? 'chrt (util-linux) is not installed' : null;
  return { lowered, idle, idleRefused };
}

/** CPU time and run-queue wait so far of this process's SCHED_IDLE threads, ns (/proc schedstat). */
export function idleThreadsCpu(): { runNs: number; waitNs: number } {
  let runNs = 0;
  let waitNs = 0;
  for (const t of listThreads()) {
    if (t.policy !== SCHED_IDLE) continue;
    try {
      const [run, wait] = readFileSync(`/proc/self/task/${t.tid}/schedstat`, 'utf8').split(' ');
      runNs += Number(run);
      waitNs += Number(wait);
    } catch {
      // a thread that ended meanwhile
    }
  }
  return { runNs, waitNs };
}

/**
 * Are the model's idle threads waiting for a CPU that the host's other work holds? Fed samples
 * of idleThreadsCpu() about every second. A window is "waiting" when, summed over the threads,
 * they waited in the run queue at least half of it and ran less than a quarter of it. An episode
 * begins with a waiting window and ends after CALM_WINDOWS windows in a row that are not (a
 * starved thread gets a slice now and then). Pure: the clock is passed in.
 */
export class CpuWaitWatch {
  static readonly CALM_WINDOWS = 3;
  private last: { runNs: number; waitNs: number; at: number } | null = null;
  private calm = 0;
  /** When the current episode began (ms), or null. */
  since: number | null = null;

  /** Whether this window was waiting, and whether an episode began or ended with it. */
  sample(
    cpu: { runNs: number; waitNs: number },
    now = Date.now(),
  ): { waiting: boolean; began: boolean; endedAfterMs: number | null } {
    const prev = this.last;
    this.last = { ...cpu, at: now };
    const windowNs = prev ? (now - prev.at) * 1e6 : 0;
    const waiting =
      prev !== null &&
      windowNs > 0 &&
      cpu.waitNs - prev.waitNs >= windowNs / 2 &&
      cpu.runNs - prev.runNs < windowNs / 4;
    const began = waiting && this.since === null;
    if (began) this.since = now;
    this.calm = waiting ? 0 : this.calm + 1;
    let endedAfterMs: number | null = null;
    if (this.since !== null && this.calm >= CpuWaitWatch.CALM_WINDOWS) {
      endedAfterMs = now - this.since;
      this.since = null;
    }
    return { waiting, began, endedAfterMs };
  }
}

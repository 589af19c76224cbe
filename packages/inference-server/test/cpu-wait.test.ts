/**
 * CpuWaitWatch (worker-priority.ts): a window of samples is "waiting for the CPU" when the idle
 * threads waited in the run queue at least half of it and ran less than a quarter of it.
 */
import { describe, expect, it } from '@jest/globals';
import { CpuWaitWatch } from '../src/worker-priority.js';

const MS = 1e6; // ns

describe('CpuWaitWatch', () => {
  it.each([
    // [what, ran ms, waited ms in a 1,000 ms window, waiting]
    ['running freely', 1_800, 10, false],
    ['idle: no work, neither runs nor waits', 0, 0, false],
    ['starved: two threads waiting all along', 3, 1_990, true],
    ['one thread waiting the whole window', 0, 1_000, true],
    ['half the window waited, a little run', 200, 500, true],
    ['waiting less than half', 100, 499, false],
    ['waiting, but running a quarter or more', 250, 1_500, false],
  ])('%s', (_what, ran, waited, waiting) => {
    const w = new CpuWaitWatch();
    expect(w.sample({ runNs: 5 * MS, waitNs: 7 * MS }, 10_000).waiting).toBe(false); // the first sample only starts
    const r = w.sample({ runNs: 5 * MS + ran * MS, waitNs: 7 * MS + waited * MS }, 11_000);
    expect(r).toEqual({ waiting, began: waiting, endedAfterMs: null });
  });

  it('compares each sample with the one before it, not the first', () => {
    const w = new CpuWaitWatch();
    w.sample({ runNs: 0, waitNs: 0 }, 0);
    expect(w.sample({ runNs: 0, waitNs: 1_000 * MS }, 1_000).waiting).toBe(true);
    expect(w.sample({ runNs: 900 * MS, waitNs: 1_000 * MS }, 2_000).waiting).toBe(false);
    // No time passed: no judgement.
    expect(w.sample({ runNs: 900 * MS, waitNs: 5_000 * MS }, 2_000).waiting).toBe(false);
  });

  it('one episode from the first waiting window until three calm ones in a row: a slice now and then does not end it', () => {
    const w = new CpuWaitWatch();
    let run = 0;
    let wait = 0;
    let at = 0;
    const step = (waiting: boolean) => {
      at += 1_000;
      if (waiting) wait += 1_900 * MS;
      else run += 900 * MS;
      return w.sample({ runNs: run, waitNs: wait }, at);
    };
    w.sample({ runNs: 0, waitNs: 0 }, 0);
    const seen = [true, true, false, true, false, false, true, false, false, false, false].map(step);
    expect(seen.map((r) => r.began)).toEqual([
      true,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
    // Ended at the third calm window in a row (at 10 s), 9 s after it began (at 1 s).
    expect(seen.map((r) => r.endedAfterMs)).toEqual([
      null,
      null,
      null,
      null,
      null,
      null,
      null,
      null,
      null,
      9_000,
      null,
    ]);
    expect(w.since).toBeNull();
    expect(step(true)).toMatchObject({ waiting: true, began: true });
  });
});

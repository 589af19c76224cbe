/** The common check of a service's watchdog notifications: see watchdog.test.ts. */
import type { ChildProcess } from 'node:child_process';
import { expect } from '@jest/globals';
import { type FakeNotifySocket, watchdogTimes } from './notify-socket.js';
import { until } from './support.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * READY=1 comes first; then WATCHDOG=1 beats about every `periodMs / 2` (the median gap, with a
 * generous margin for a loaded machine); SIGSTOP silences them (after the one that may be on its
 * way), SIGCONT brings them back.
 */
export async function expectWatchdogLifecycle(sock: FakeNotifySocket, child: ChildProcess, periodMs: number) {
  await until('READY=1', () => sock.messages.some((m) => m.m === 'READY=1'), 30_000);
  await until('five WATCHDOG=1 beats', () => watchdogTimes(sock).length >= 5, 30_000);
  const names = sock.messages.map((m) => m.m);
  expect(names.indexOf('READY=1')).toBeLessThan(names.indexOf('WATCHDOG=1'));
  const times = watchdogTimes(sock);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  const median = [...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!;
  expect(median).toBeGreaterThan((periodMs / 2000) * 0.6);
  expect(median).toBeLessThan((periodMs / 2000) * 1.8);

  child.kill('SIGSTOP');
  await sleep(periodMs * 1.5); // a beat already handed to systemd-notify may still arrive
  const frozen = watchdogTimes(sock).length;
  await sleep(periodMs * 3);
  expect(watchdogTimes(sock).length).toBe(frozen);
  child.kill('SIGCONT');
  await until('a beat after SIGCONT', () => watchdogTimes(sock).length > frozen, 15_000);
}

/**
 * `guardian run` under a service manager (issue 30), against a fake NOTIFY_SOCKET: READY=1 once
 * its loop runs, WATCHDOG=1 at half the period while its ticks run, nothing while it is stopped
 * (SIGSTOP); and the pure rule of when its ticks no longer run.
 */
import { describe, expect, it } from '@jest/globals';
import { expectWatchdogLifecycle } from '../../../test/notify-lifecycle.js';
import { fakeNotifySocket } from '../../../test/notify-socket.js';
import { TickClock } from '../src/loop.js';
import { fixture } from './fixture.js';
import { exited, spawnGuardian } from './helpers.js';

const fx = fixture();

describe('the guardian and its watchdog', () => {
  it('READY=1, WATCHDOG=1 every half period while it ticks, none while stopped', async () => {
    const sc = fx.scenario('notify');
    const s = await sc.fault();
    const sock = await fakeNotifySocket();
    const g = spawnGuardian(['run', '-c', sc.config(s.port, { intervalS: 0.5 })], {
      NOTIFY_SOCKET: sock.path,
      WATCHDOG_USEC: '1000000',
    });
    try {
      await expectWatchdogLifecycle(sock, g, 1000);
      expect(sock.messages.map((m) => m.m)).toContain('STATUS=probing every 0.5 s');
      g.kill('SIGTERM');
      expect(await exited(g)).toEqual({ code: 0, signal: null });
    } finally {
      g.kill('SIGKILL');
      sock.close();
    }
  });

  it.each([
    ['between ticks, within the interval + slack', null, 60_000 + 29_000, null],
    ['no tick begun for longer than the interval + slack', null, 60_000 + 31_000, 'no tick for 91 s'],
    ['a tick under way within its limit', 0, 299_000, null],
    ['a tick under way past its limit', 0, 301_000, 'a tick has been running for 301 s'],
  ])('TickClock: %s', (_what, begun, at, expected) => {
    const c = new TickClock(60_000, 300_000, 30_000, 0);
    if (begun !== null) c.begin(begun);
    expect(c.late(at)).toBe(expected);
  });
});

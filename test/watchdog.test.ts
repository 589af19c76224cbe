/**
 * The services' systemd notifications (issue 30), against a fake NOTIFY_SOCKET (a real Unix
 * datagram socket, bound by python3): READY=1, then WATCHDOG=1 at half the period that
 * WATCHDOG_USEC asks for, and nothing once the service's event loop cannot run (SIGSTOP);
 * the beats come back with SIGCONT. The relay and the messaging daemon as real processes here;
 * the guardian and the inference server in their own packages' tests.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import { serviceNotifier } from '../packages/shared-types/src/node/index.js';
import { spawnDaemon, tmpDir } from '../packages/signal-daemon/test/helpers.js';
import { expectWatchdogLifecycle } from './notify-lifecycle.js';
import { type FakeNotifySocket, fakeNotifySocket } from './notify-socket.js';
import { exited, until } from './support.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RELAY = fileURLToPath(new URL('../packages/tcp-relay/bin/tcp-relay.js', import.meta.url));

describe('service watchdog notifications', () => {
  let sock: FakeNotifySocket | null = null;
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGCONT');
        c.kill('SIGKILL');
        await exited(c);
      }
    }
    sock?.close();
    sock = null;
  });

  it('the relay: READY=1, WATCHDOG=1 every half period, none while stopped, STOPPING=1 on SIGTERM; each once', async () => {
    sock = await fakeNotifySocket();
    const relay = spawn(process.execPath, [RELAY, '--listen', '127.0.0.1:0', '--target', '127.0.0.1:1'], {
      env: { ...process.env, NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '1000000' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(relay);
    await expectWatchdogLifecycle(sock, relay, 1000);
    relay.kill('SIGTERM');
    expect(await exited(relay)).toEqual({ code: 0, signal: null });
    await until('STOPPING=1', () => sock!.messages.some((m) => m.m === 'STOPPING=1'));
    await sleep(1000); // a second STOPPING=1 (from the lifecycle's own `stopping`) would be on its way
    const names = sock.messages.map((m) => m.m);
    // The STATUS= lines follow the lifecycle: serving, then stopping (with the signal's name).
    expect(names).toContain('STATUS=serving 127.0.0.1:0 -> 127.0.0.1:1');
    expect(names.indexOf('STATUS=stopping (SIGTERM)')).toBeGreaterThan(names.indexOf('READY=1'));
    expect(names.filter((m) => m === 'READY=1')).toHaveLength(1);
    expect(names.filter((m) => m === 'STOPPING=1')).toHaveLength(1);
  });

  it('the messaging daemon: the same, with its STATUS= line', async () => {
    sock = await fakeNotifySocket();
    const tmp = tmpDir('vigil-notify-daemon-');
    const d = await spawnDaemon(
      [
        '--account',
        '+15550000031',
        '--http',
        '127.0.0.1:0',
        '--tcp',
        '127.0.0.1:0',
        '--localnet',
        join(tmp.dir, 'localnet.sqlite'),
        '--data-dir',
        join(tmp.dir, 'data'),
      ],
      { NOTIFY_SOCKET: sock.path, WATCHDOG_USEC: '1000000' },
    );
    children.push(d.child);
    await expectWatchdogLifecycle(sock, d.child, 1000);
    expect(sock.messages.map((m) => m.m)).toContain('STATUS=serving +15550000031');
    tmp.cleanup();
  });

  it('sends nothing, and starts no timer, without NOTIFY_SOCKET or a supervisor pipe', () => {
    const n = serviceNotifier({ env: { WATCHDOG_USEC: '1000000' }, healthy: () => null });
    expect(n.target).toBeNull();
    expect(n.watchdogMs).toBeNull();
    n.ready('x');
    n.close();
  });

  it('honours WATCHDOG_PID: a period meant for another process is not this one’s', () => {
    const env = { NOTIFY_SOCKET: '/nonexistent', WATCHDOG_USEC: '4000000' };
    expect(serviceNotifier({ env: { ...env, WATCHDOG_PID: String(process.pid) } }).watchdogMs).toBe(4000);
    expect(serviceNotifier({ env: { ...env, WATCHDOG_PID: '1' } }).watchdogMs).toBeNull();
  });
});

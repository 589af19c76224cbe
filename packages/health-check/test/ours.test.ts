/**
 * The health check acts only on its own daemon (the configured account), with real daemons of two
 * accounts on one local network; a hung daemon is ended before it is brought back, whatever repairs
 * are configured; `daemon.program` as a script name or a full path.
 */

import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { HealthCheckResult, HealthReport } from '@vigil/shared-types';
import { pidAlive } from '@vigil/shared-types/node';
import { exited } from '../../../test/support.js';
import { ACCOUNT, DAEMON_BIN, fixture, freePort, healthCheck, Lab, NODE, rpc } from './helpers.js';

const OTHER = '+15550000002';
const check = (report: HealthReport, name: string) => report.checks.find((c) => c.name === name) as HealthCheckResult;
const json = (stdout: string) => JSON.parse(stdout) as HealthReport;
const answers = async (port: number) => (await rpc({ host: '127.0.0.1', port }, 'version')).result.version;

let lab: Lab;
beforeEach(async () => {
  lab = await Lab.create();
});
afterEach(() => lab.cleanup());

/** The lab's config: its daemon relaunched directly (no service manager). */
function relaunchOnly(): string {
  const base = lab.baseConfig();
  return lab.writeConfig({ ...base, daemon: { ...base.daemon, relaunch: lab.daemonArgv() } });
}

describe('two accounts on one local network (the daemon README example)', () => {
  it('the other account’s daemon (account from its environment) is reported and survives --fix', async () => {
    const ours = await lab.startDaemon();
    const otherPort = await freePort();
    const other = await lab.startDaemon(
      'other',
      { http: otherPort, tcp: 0 },
      { account: [], env: { SIGNAL_DAEMON_ACCOUNT: OTHER } },
    );
    const file = relaunchOnly();

    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(0);
    const c = check(json(r.stdout), 'single_daemon');
    expect(c.status).toBe('ok');
    expect(c.detail).toContain(`one daemon of ${ACCOUNT} (pid ${ours.pid})`);
    expect(c.detail).toContain(`other daemons, not touched: ${OTHER} (pid ${other.pid})`);
    expect(c.fix).toBeUndefined();
    expect(pidAlive(other.pid!)).toBe(true);
    expect(pidAlive(ours.pid!)).toBe(true);
    expect(await answers(otherPort)).toMatch(/\d/);
  });

  it('two daemons of our account are reduced to one (the one serving the port); the other account’s untouched', async () => {
    const ours = await lab.startDaemon();
    const duplicate = await lab.startDaemon(
      'dup',
      { http: await freePort(), tcp: 0 },
      { account: [`--account=${ACCOUNT}`] },
    );
    const otherPort = await freePort();
    const other = await lab.startDaemon('other', { http: otherPort, tcp: 0 }, { account: ['-a', OTHER] });
    const file = relaunchOnly();

    const found = await healthCheck(['--json', '--config', file]);
    expect(found.code).toBe(2);
    expect(check(json(found.stdout), 'single_daemon').detail).toMatch(
      new RegExp(
        `^2 daemon processes \\(${ours.pid}, ${duplicate.pid}\\) run signal-daemon for ${ACCOUNT.replace('+', '\\+')}`,
      ),
    );

    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    const c = check(json(r.stdout), 'single_daemon');
    expect(c.status).toBe('healed');
    expect(c.fix!.action).toBe(
      `ended the duplicate daemon ${duplicate.pid}; kept ${ours.pid}, which serves 127.0.0.1:${lab.httpPort}`,
    );
    expect(c.detail).toContain(`now: one daemon of ${ACCOUNT} (pid ${ours.pid})`);
    expect(await exited(duplicate)).toBeTruthy();
    expect(pidAlive(ours.pid!)).toBe(true);
    expect(pidAlive(other.pid!)).toBe(true);
    expect(await answers(lab.httpPort)).toMatch(/\d/);
    expect(await answers(otherPort)).toMatch(/\d/);
  });
});

describe('a hung daemon (SIGSTOP) with only a relaunch configured', () => {
  it('is ended (TERM, then KILL) before the relaunch; a fresh daemon answers; exit 1', async () => {
    const hung = await lab.startDaemon();
    hung.kill('SIGSTOP');
    const file = relaunchOnly();

    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    const port = check(json(r.stdout), 'signal_port');
    expect(port.status).toBe('healed');
    expect(port.fix!.detail).toMatch(
      new RegExp(
        `^ended the daemon ${hung.pid} that holds 127\\.0\\.0\\.1:${lab.httpPort} and does not answer; relaunch `,
      ),
    );
    expect(await exited(hung)).toBeTruthy();
    const pids = await lab.daemonPids();
    expect(pids).toHaveLength(1);
    expect(pids[0]).not.toBe(hung.pid);
    expect(await answers(lab.httpPort)).toMatch(/\d/);
    expect(check(json(r.stdout), 'single_daemon').status).toBe('ok');
  });

  it('a hung port holder that is not our daemon is reported, never killed', async () => {
    const squatter = await lab.spawn([NODE, fixture('listen.mjs'), '127.0.0.1', String(lab.httpPort)], 'listening');
    squatter.kill('SIGSTOP');
    try {
      const r = await healthCheck(['--json', '--fix', '--config', relaunchOnly()]);
      expect(r.code).toBe(2);
      const port = check(json(r.stdout), 'signal_port');
      expect(port.status).toBe('failed');
      expect(port.fix!.detail).toContain(
        `127.0.0.1:${lab.httpPort} is held by pid ${squatter.pid}, which is not a daemon of ${ACCOUNT}: not touched`,
      );
      expect(pidAlive(squatter.pid!)).toBe(true);
    } finally {
      squatter.kill('SIGCONT');
    }
  });
});

describe('daemon.program', () => {
  it.each([
    ['the script name', 'signal-daemon.js'],
    ['the script’s full path', DAEMON_BIN],
  ])('as %s finds the running daemon', async (_what, program) => {
    const daemon = await lab.startDaemon();
    const base = lab.baseConfig();
    const r = await healthCheck([
      '--json',
      '--config',
      lab.writeConfig({ ...base, daemon: { ...base.daemon, program } }),
    ]);
    expect(r.code).toBe(0);
    expect(check(json(r.stdout), 'single_daemon').detail).toMatch(
      new RegExp(`^one daemon of \\S+ \\(pid ${daemon.pid}\\)`),
    );
  });
});

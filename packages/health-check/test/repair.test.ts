/**
 * --fix against real processes: a killed daemon relaunched, a retired port's occupant killed,
 * duplicate daemons reduced to one, a flow configuration patched with a backup, a gateway and a
 * relay restarted; the launchd and systemd adapters by the argv they run.
 */

import { chmodSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { HealthCheckResult, HealthReport } from '@vigil/shared-types';
import { exited } from '../../../test/support.js';
import {
  ACCOUNT,
  fixture,
  freePort,
  healthCheck,
  Lab,
  mkdirp,
  NODE,
  RELAY_BIN,
  rpc,
  statusOf,
  until,
} from './helpers.js';

const check = (report: HealthReport, name: string) => report.checks.find((c) => c.name === name) as HealthCheckResult;
const json = (stdout: string) => JSON.parse(stdout) as HealthReport;
const recorded = (file: string) =>
  existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { name: string; argv: string[] })
    : [];

let lab: Lab;
beforeEach(async () => {
  lab = await Lab.create();
});
afterEach(() => lab.cleanup());

describe('a killed daemon', () => {
  it('is manual work without --fix (2); with --fix the command manager brings it back (1); then healthy (0)', async () => {
    const daemon = await lab.startDaemon();
    const base = lab.baseConfig();
    const file = lab.writeConfig({ ...base, daemon: { ...base.daemon, service: lab.launcher(lab.daemonArgv()) } });
    daemon.kill('SIGKILL');
    await exited(daemon);

    const down = await healthCheck(['--json', '--config', file]);
    expect(down.code).toBe(2);
    expect(check(json(down.stdout), 'signal_port')).toMatchObject({
      status: 'failed',
      detail: expect.stringContaining(`JSON-RPC version on 127.0.0.1:${lab.httpPort} failed`),
    });
    expect(check(json(down.stdout), 'single_daemon').detail).toMatch(/^0 daemon processes \(none\)/);
    expect(check(json(down.stdout), 'signal_port').fix).toBeUndefined();
    expect(await lab.daemonPids()).toEqual([]); // a check alone changes nothing

    const fixed = await healthCheck(['--json', '--fix', '--config', file]);
    expect(fixed.code).toBe(1);
    const port = check(json(fixed.stdout), 'signal_port');
    expect(port.status).toBe('healed');
    expect(port.fix).toMatchObject({ action: 'restart the daemon through command', ok: true });
    expect(port.detail).toMatch(/; now: version \S+ at 127\.0\.0\.1:\d+$/);
    expect(check(json(fixed.stdout), 'single_daemon').status).toBe('ok');
    expect(lab.reports().at(-1)).toMatchObject({ fix: true, exitCode: 1 });

    // Really back: a new process answering JSON-RPC.
    const pids = await lab.daemonPids();
    expect(pids).toHaveLength(1);
    expect(pids[0]).not.toBe(daemon.pid);
    expect((await rpc({ host: '127.0.0.1', port: lab.httpPort }, 'version')).result.version).toMatch(/\d/);
    expect((await healthCheck(['--config', file])).code).toBe(0);
  });

  it('when the service manager fails, a direct relaunch (configured argv) brings it back', async () => {
    const calls = lab.path('calls.jsonl');
    const base = lab.baseConfig();
    const file = lab.writeConfig({
      ...base,
      daemon: { ...base.daemon, service: lab.recorder(calls, 5), relaunch: lab.daemonArgv() },
    });
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    const port = check(json(r.stdout), 'signal_port');
    expect(port.status).toBe('healed');
    expect(port.fix!.action).toBe('relaunch the daemon');
    expect(port.fix!.detail).toMatch(
      /^command restart \(.*record\.mjs .* restart\) rc 5; relaunch .*node \(pid \d+\)$/,
    );
    expect(recorded(calls)).toEqual([{ name: 'restart', argv: [] }]);
    expect(await lab.daemonPids()).toHaveLength(1);
    // Its output went to the relaunch log.
    await until('the relaunch log', () => readFileSync(lab.path('relaunch.log'), 'utf8').includes('"msg":"listening"'));
  });

  it('an unfixable daemon (a missing binary) is manual work (2), quickly', async () => {
    const base = lab.baseConfig();
    const file = lab.writeConfig({
      ...base,
      daemon: { ...base.daemon, relaunch: [lab.path('no/such/signal-daemon')] },
    });
    const t0 = Date.now();
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(2);
    expect(Date.now() - t0).toBeLessThan(6000); // not the 8 s fix timeout: a spawn error is final
    const port = check(json(r.stdout), 'signal_port');
    expect(port.status).toBe('failed');
    expect(port.fix).toMatchObject({ ok: false, action: 'restart the daemon' });
    expect(port.fix!.detail).toContain('ENOENT');
  });

  it('a relaunch that dies at once is not waited for', async () => {
    const blocker = await lab.spawn([NODE, fixture('listen.mjs'), '127.0.0.1', String(lab.httpPort)], 'listening');
    // Something else holds the daemon's port (and answers nothing useful): the daemon exits.
    const base = lab.baseConfig();
    const file = lab.writeConfig({ ...base, daemon: { ...base.daemon, relaunch: lab.daemonArgv() } });
    const t0 = Date.now();
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(2);
    expect(Date.now() - t0).toBeLessThan(7000);
    expect(check(json(r.stdout), 'signal_port').fix!.detail).toMatch(/exited with \d+ \(its output: .*relaunch\.log\)/);
    blocker.kill();
  });
});

describe('single_daemon', () => {
  it('kills whatever holds a retired port (found by port, not by name) with --fix', async () => {
    await lab.startDaemon();
    const retired = await freePort();
    const occupant = await lab.spawn([NODE, fixture('listen.mjs'), '127.0.0.1', String(retired)], 'listening');
    const file = lab.writeConfig({ ...lab.baseConfig(), retiredPorts: [retired] });

    const found = await healthCheck(['--json', '--config', file]);
    expect(found.code).toBe(2);
    expect(check(json(found.stdout), 'single_daemon').detail).toBe(`something answers on retired port ${retired}`);
    expect(occupant.exitCode).toBeNull();

    const fixed = await healthCheck(['--json', '--fix', '--config', file]);
    expect(fixed.code).toBe(1);
    const c = check(json(fixed.stdout), 'single_daemon');
    expect(c.status).toBe('healed');
    expect(c.fix!.action).toBe(`killed ${occupant.pid} on ${retired}`);
    expect(await exited(occupant)).toEqual({ code: null, signal: 'SIGTERM' });
    expect(await lab.daemonPids()).toHaveLength(1); // the daemon itself untouched
  });

  it('two daemons of our account, neither serving its address: one started on it, the two ended', async () => {
    const base = lab.baseConfig();
    // The account named in processMatch, as the stack writes it.
    const daemon = {
      ...base.daemon,
      processMatch: [...lab.processMatch, ACCOUNT],
      service: lab.launcher(lab.daemonArgv()),
    };
    const file = lab.writeConfig({ ...base, daemon });
    const first = await lab.startDaemon('a', { http: await freePort(), tcp: 0 });
    const second = await lab.startDaemon('b', { http: await freePort(), tcp: 0 });
    expect(await lab.daemonPids()).toHaveLength(2);

    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    expect(check(json(r.stdout), 'signal_port').status).toBe('healed');
    const c = check(json(r.stdout), 'single_daemon');
    expect(c.status).toBe('healed');
    const started = (await lab.daemonPids()).filter((pid) => pid !== first.pid && pid !== second.pid);
    expect(started).toHaveLength(1);
    // Listed in the process table's order (by pid, which wraps around): not always the order started.
    const byPid = (...pids: number[]) => pids.sort((a, b) => a - b).join(', ');
    expect(c.detail).toMatch(
      new RegExp(
        `^3 daemon processes \\(${byPid(first.pid!, second.pid!, started[0]!)}\\) run signal-daemon for \\+15550000001 … .*localnet\\.db`,
      ),
    );
    expect(c.fix!.action).toBe(
      `ended the duplicate daemons ${byPid(first.pid!, second.pid!)}; kept ${started[0]}, which serves 127.0.0.1:${lab.httpPort}`,
    );
    await exited(first);
    await exited(second);
    expect(await lab.daemonPids()).toEqual(started);
    expect((await rpc({ host: '127.0.0.1', port: lab.httpPort }, 'version')).result).toBeTruthy();
  });
});

describe('forceflow_port', () => {
  it('a configuration pointing at another port is patched atomically, with a backup, and the flow service restarted', async () => {
    await lab.startDaemon();
    const flow = lab.path('flow/openclaw.json');
    mkdirp(lab.path('flow'));
    const original = `${JSON.stringify({ channels: { signal: { httpUrl: 'http://127.0.0.1:18080/api', enabled: true } }, other: [1, 2] }, null, 2)}\n`;
    writeFileSync(flow, original);
    const calls = lab.path('calls.jsonl');
    const file = lab.writeConfig({
      ...lab.baseConfig(),
      flowConfig: { path: flow, key: 'channels.signal.httpUrl' },
      gateway: { address: `127.0.0.1:${await freePort()}`, service: lab.recorder(calls) },
      timeouts: { checkMs: 1000, fixMs: 1000 },
    });

    const seen = await healthCheck(['--json', '--config', file]);
    expect(check(json(seen.stdout), 'forceflow_port')).toMatchObject({
      status: 'failed',
      detail: `${flow} channels.signal.httpUrl = "http://127.0.0.1:18080/api", not port ${lab.httpPort}`,
    });
    expect(readFileSync(flow, 'utf8')).toBe(original); // a check alone changes nothing

    const r = await healthCheck(['--json', '--fix', '--config', file]);
    const c = check(json(r.stdout), 'forceflow_port');
    expect(c.status).toBe('healed');
    const patched = JSON.parse(readFileSync(flow, 'utf8'));
    expect(patched).toEqual({
      channels: { signal: { httpUrl: `http://127.0.0.1:${lab.httpPort}/api`, enabled: true } },
      other: [1, 2],
    });
    const backups = readdirSync(lab.path('flow')).filter((f) => f.startsWith('openclaw.json.bak-'));
    expect(backups).toHaveLength(1);
    expect(readFileSync(lab.path(`flow/${backups[0]}`), 'utf8')).toBe(original);
    expect(c.fix!.action).toContain(`backup ${lab.path(`flow/${backups[0]}`)}`);
    expect(readdirSync(lab.path('flow')).filter((f) => f.includes('.tmp'))).toEqual([]);
    expect(recorded(calls).map((x) => x.name)).toContain('restart');
    // The gateway itself is down in this lab: that one stays failed, so the run is manual work.
    expect(check(json(r.stdout), 'gateway_plugin').status).toBe('failed');
    expect(r.code).toBe(2);
  });

  it('a missing key or an unreadable file is reported, not invented', async () => {
    writeFileSync(lab.path('flow.json'), '{"channels":{}}');
    const file = lab.writeConfig({
      ...lab.baseConfig(),
      flowConfig: { path: lab.path('flow.json'), key: 'channels.signal.port' },
    });
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(check(json(r.stdout), 'forceflow_port')).toMatchObject({
      status: 'failed',
      detail: `${lab.path('flow.json')} has no channels.signal.port`,
    });
    expect(readFileSync(lab.path('flow.json'), 'utf8')).toBe('{"channels":{}}');
    writeFileSync(lab.path('flow.json'), '{ not json');
    const bad = await healthCheck(['--json', '--config', file]);
    expect(check(json(bad.stdout), 'forceflow_port').detail).toMatch(/^cannot read .*flow\.json: /);
  });
});

describe('consumers brought back with --fix', () => {
  it('a gateway that is down is restarted through its service manager and found following the daemon', async () => {
    await lab.startDaemon();
    const port = await freePort();
    const file = lab.writeConfig({
      ...lab.baseConfig(),
      gateway: { address: `127.0.0.1:${port}`, service: lab.launcher(lab.gatewayArgv(port)) },
    });
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    expect(check(json(r.stdout), 'gateway_plugin')).toMatchObject({
      status: 'healed',
      detail: expect.stringMatching(/^the gateway 127\.0\.0\.1:\d+ is down; now: gateway .* up, consumer connected/),
    });
    await until('the gateway following the daemon', () =>
      readFileSync(lab.path('gateway.log'), 'utf8').includes('event stream open (HTTP 200)'),
    );
  });

  it('a relay that is down is restarted and its link address accepts again', async () => {
    await lab.startDaemon();
    const port = await freePort('127.0.0.2');
    // Its log in the lab: the lab's cleanup finds the relaunched relay by its command line.
    const argv = [
      NODE,
      RELAY_BIN,
      '--listen',
      `127.0.0.2:${port}`,
      '--target',
      `127.0.0.1:${lab.tcpPort}`,
      '--log-file',
      lab.path('relay.log'),
    ];
    const file = lab.writeConfig({
      ...lab.baseConfig(),
      relay: { link: `127.0.0.2:${port}`, service: lab.launcher(argv) },
    });
    const down = await healthCheck(['--json', '--config', file]);
    expect(check(json(down.stdout), 'relay_link')).toMatchObject({
      status: 'failed',
      detail: `127.0.0.2:${port} refuses or does not answer`,
    });
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(1);
    expect(statusOf(json(r.stdout)).relay_link).toBe('healed');
  });
});

describe('service managers, by the argv they run', () => {
  /**
   * A directory with stand-ins for launchctl and systemctl, first on PATH: each records its argv
   * and then, as the real ones would, starts the service (the daemon, detached) and returns.
   */
  function standIns(calls: string): NodeJS.ProcessEnv {
    const bin = mkdirp(lab.path('bin'));
    const start = [NODE, fixture('launch.mjs'), lab.path('launched.log'), '--', ...lab.daemonArgv()];
    for (const name of ['launchctl', 'systemctl']) {
      writeFileSync(
        `${bin}/${name}`,
        `#!/bin/sh\n"${NODE}" "${fixture('record.mjs')}" "${calls}" 0 ${name} "$@" && exec ${start.map((a) => `"${a}"`).join(' ')}\n`,
      );
      chmodSync(`${bin}/${name}`, 0o755);
    }
    return { PATH: `${bin}:${process.env.PATH}` };
  }

  it.each([
    [
      'launchd',
      { kind: 'launchd', label: 'org.vigil.signal-daemon' },
      { name: 'launchctl', argv: ['kickstart', '-k', `gui/${process.getuid!()}/org.vigil.signal-daemon`] },
    ],
    [
      'launchd in another domain',
      { kind: 'launchd', label: 'org.vigil.signal-daemon', domain: 'system' },
      { name: 'launchctl', argv: ['kickstart', '-k', 'system/org.vigil.signal-daemon'] },
    ],
    [
      'systemd --user',
      { kind: 'systemd', unit: 'vigil-signal-daemon.service', user: true },
      { name: 'systemctl', argv: ['--user', 'restart', 'vigil-signal-daemon.service'] },
    ],
    [
      'systemd (system)',
      { kind: 'systemd', unit: 'vigil-signal-daemon.service' },
      { name: 'systemctl', argv: ['restart', 'vigil-signal-daemon.service'] },
    ],
  ])('%s', async (_what, service, expected) => {
    const calls = lab.path('calls.jsonl');
    const base = lab.baseConfig();
    const file = lab.writeConfig({ ...base, daemon: { ...base.daemon, service } });
    const r = await healthCheck(['--json', '--fix', '--config', file], standIns(calls));
    expect(recorded(calls)).toEqual([expected]);
    const port = check(json(r.stdout), 'signal_port');
    expect(port.fix).toEqual({
      action: `restart the daemon through ${service.kind}`,
      ok: true,
      detail: `${service.kind} restart (${expected.name} ${expected.argv.join(' ')}) rc 0`,
    });
    expect(port.status).toBe('healed');
    expect(await lab.daemonPids()).toHaveLength(1);
  });
});

describe('a bounded run', () => {
  it('a repair that hangs is cut at the run budget, and later repairs are not tried', async () => {
    const hang = { kind: 'command', restart: [NODE, '-e', 'setTimeout(() => {}, 60_000)'] };
    const base = lab.baseConfig();
    const file = lab.writeConfig({
      ...base,
      daemon: { ...base.daemon, service: hang },
      relay: { link: `127.0.0.2:${await freePort('127.0.0.2')}`, service: hang },
      timeouts: { checkMs: 500, fixMs: 20_000, runMs: 1500 },
    });
    const t0 = Date.now();
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(r.code).toBe(2);
    const report = json(r.stdout);
    // Cut by the command runner, as timeout(1) says it: 124.
    expect(check(report, 'signal_port').fix!.detail).toMatch(
      /^command restart \(.*\) rc 124: .*no exit within .* killed/,
    );
    expect(check(report, 'relay_link').fix).toEqual({
      action: 'none',
      ok: false,
      detail: 'not tried: the run has used its 1500 ms (timeouts.runMs)',
    });
  });
});

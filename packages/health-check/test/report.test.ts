/**
 * The health check against real processes, where nothing needs repairing: the healthy stack, what
 * is not configured, reports, the health log, the lock, configuration errors, the storm and the
 * outbound send.
 */

import type { ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { HEALTH_CHECKS, type HealthReport } from '@vigil/shared-types';
import { fixture, freePort, healthCheck, Lab, NODE, rpc, statusOf } from './helpers.js';

const iso = (msAgo: number) => new Date(Date.now() - msAgo).toISOString();

describe('a healthy stack with every consumer configured', () => {
  let lab: Lab;
  let config: Record<string, any>;
  let configFile: string;

  beforeAll(async () => {
    lab = await Lab.create();
    await lab.startDaemon();
    const relayPort = await freePort('127.0.0.2');
    await lab.startRelay(relayPort);
    const gatewayPort = await freePort();
    await lab.spawn(lab.gatewayArgv(gatewayPort), 'following');
    // A few WebSocket connections, well under the storm threshold.
    for (let i = 0; i < 3; i++) appendFileSync(lab.path('gateway.log'), `${iso(60_000)} websocket connected\n`);
    writeFileSync(
      lab.path('flow.json'),
      JSON.stringify({ channels: { signal: { httpUrl: `http://127.0.0.1:${lab.httpPort}` } } }),
    );
    // A real send, so that the daemon's status has a recent one.
    await rpc({ host: '127.0.0.1', port: lab.httpPort }, 'send', { noteToSelf: true, message: 'hello' });
    config = {
      ...lab.baseConfig(),
      relay: { link: `127.0.0.2:${relayPort}` },
      retiredPorts: [await freePort(), await freePort()],
      gateway: { address: `127.0.0.1:${gatewayPort}`, log: lab.path('gateway.log') },
      flowConfig: { path: lab.path('flow.json'), key: 'channels.signal.httpUrl' },
    };
    configFile = lab.writeConfig(config);
  }, 30_000);

  afterAll(() => lab.cleanup());

  it('reports every check ok, in order, and exits 0', async () => {
    const r = await healthCheck(['--json', '--config', configFile]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as HealthReport;
    expect(report.checks.map((c) => c.name)).toEqual([...HEALTH_CHECKS]);
    expect(report.checks.every((c) => c.status === 'ok')).toBe(true);
    expect(report).toMatchObject({ fix: false, exitCode: 0 });
    expect(typeof report.ts).toBe('number');
    expect(Math.abs(report.ts * 1000 - Date.now())).toBeLessThan(30_000);
    const by = Object.fromEntries(report.checks.map((c) => [c.name, c.detail]));
    expect(by.signal_port).toMatch(/^version \S+ at 127\.0\.0\.1:\d+$/);
    expect(by.relay_link).toBe(`${config.relay.link} accepts connections`);
    expect(by.single_daemon).toMatch(/^one daemon of \+15550000001 \(pid \d+\)/);
    expect(by.websocket_health).toBe('3 WebSocket connections in the last 15 min (storm at 30)');
    expect(by.outbound_send).toMatch(/^last successful send \d+ s ago$/);
    for (const c of report.checks) expect(c.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('appends the same report to the health log, one line per run', async () => {
    const before = lab.reports().length;
    const r = await healthCheck(['--json', '--config', configFile]);
    const after = lab.reports();
    expect(after).toHaveLength(before + 1);
    expect(after.at(-1)).toEqual(JSON.parse(r.stdout));
  });

  it('prints a table without colour when stdout is not a terminal', async () => {
    const r = await healthCheck(['--config', configFile]);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^check\s+status\s+detail$/);
    for (const name of HEALTH_CHECKS) expect(r.stdout).toMatch(new RegExp(`^${name}\\s+ok\\s+\\S`, 'm'));
    expect(lines.at(-1)).toMatch(/^healthy \(exit 0, \d+ ms\)$/);
    expect(r.stdout).not.toContain('\x1b[');
  });

  it('--quiet prints nothing and still writes the health log', async () => {
    const before = lab.reports().length;
    const r = await healthCheck(['--quiet', '--fix', '--config', configFile]);
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(lab.reports()).toHaveLength(before + 1);
    expect(lab.reports().at(-1)).toMatchObject({ fix: true, exitCode: 0 });
  });

  it('takes the configuration from HEALTH_CHECK_CONFIG', async () => {
    const r = await healthCheck(['--json'], { HEALTH_CHECK_CONFIG: configFile });
    expect(r.code).toBe(0);
    expect(statusOf(JSON.parse(r.stdout)).relay_link).toBe('ok');
  });

  it('a storm of WebSocket connections in the window is manual work (2), even with --fix', async () => {
    // Old connections do not count; recent ones over the threshold do.
    const log = lab.path('storm.log');
    for (let i = 0; i < 100; i++) appendFileSync(log, `${iso(40 * 60_000)} websocket connected\n`);
    for (let i = 0; i < 10; i++)
      appendFileSync(log, `{"ts":${(Date.now() - 30_000) / 1000},"msg":"WebSocket opened"}\n`);
    const file = lab.writeConfig(
      { ...config, gateway: { ...config.gateway, log, storm: { threshold: 10, windowMinutes: 15 } } },
      'storm.json',
    );
    const r = await healthCheck(['--json', '--fix', '--config', file]);
    expect(r.code).toBe(2);
    const storm = (JSON.parse(r.stdout) as HealthReport).checks.find((c) => c.name === 'websocket_health')!;
    expect(storm).toMatchObject({
      status: 'failed',
      detail: expect.stringContaining('connection storm: 10 WebSocket'),
    });
    expect(storm.fix).toBeUndefined(); // report only

    // Under the threshold: fine again.
    const calm = lab.writeConfig(
      { ...config, gateway: { ...config.gateway, log, storm: { threshold: 11, windowMinutes: 15 } } },
      'calm.json',
    );
    expect((await healthCheck(['--config', calm])).code).toBe(0);
  });

  it('a configured real send (outbound.probe) is made through the daemon', async () => {
    const file = lab.writeConfig(
      { ...config, outbound: { probe: { noteToSelf: true, message: 'probe' } } },
      'probe.json',
    );
    const t0 = Date.now();
    const r = await healthCheck(['--json', '--config', file]);
    expect(r.code).toBe(0);
    const c = (JSON.parse(r.stdout) as HealthReport).checks.find((x) => x.name === 'outbound_send')!;
    expect(c.detail).toMatch(/^a real send succeeded now \(timestamp \d+\)$/);
    // The daemon made it: its status says so.
    const status = await fetch(`http://127.0.0.1:${lab.httpPort}/api/v1/check`, {
      headers: { accept: 'application/json' },
    });
    const sent = ((await status.json()) as { lastOutboundSendAt: number }).lastOutboundSendAt;
    expect(sent).toBeGreaterThanOrEqual(t0);
  });
});

describe('what is not configured, or too old', () => {
  let lab: Lab;
  let daemon: ChildProcess;
  beforeAll(async () => {
    lab = await Lab.create();
    daemon = await lab.startDaemon();
  }, 30_000);
  afterAll(() => lab.cleanup());

  it('reports unconfigured consumers as skipped, never ok', async () => {
    const r = await healthCheck(['--json', '--config', lab.writeConfig(lab.baseConfig())]);
    expect(r.code).toBe(0);
    expect(statusOf(JSON.parse(r.stdout))).toEqual({
      signal_port: 'ok',
      relay_link: 'skipped',
      single_daemon: 'ok',
      gateway_plugin: 'skipped',
      forceflow_port: 'skipped',
      websocket_health: 'skipped',
      // This daemon has sent nothing yet and no log is configured.
      outbound_send: 'skipped',
    });
    const table = (await healthCheck(['--config', lab.path('health.json')])).stdout;
    expect(table).toMatch(/^relay_link\s+skipped\s+no relay configured$/m);
  });

  it('an outbound send older than the threshold is manual work (2)', async () => {
    const log = lab.path('daemon.log');
    writeFileSync(
      log,
      [
        JSON.stringify({ ts: (Date.now() - 50 * 3_600_000) / 1000, level: 'info', msg: 'send succeeded' }),
        JSON.stringify({ ts: Date.now() / 1000, level: 'info', msg: 'listening' }),
        '',
      ].join('\n'),
    );
    const base = lab.baseConfig();
    const file = lab.writeConfig({ ...base, daemon: { ...base.daemon, log }, outbound: { maxAgeHours: 48 } });
    const r = await healthCheck(['--json', '--config', file]);
    expect(r.code).toBe(2);
    const c = (JSON.parse(r.stdout) as HealthReport).checks.find((x) => x.name === 'outbound_send')!;
    expect(c).toMatchObject({ status: 'failed', detail: 'last successful send 50.0 h ago (more than 48 h)' });
    // A send now makes it fresh again (the daemon's status).
    await rpc({ host: '127.0.0.1', port: lab.httpPort }, 'send', { noteToSelf: true, message: 'x' });
    expect((await healthCheck(['--config', file])).code).toBe(0);
  });

  it('a gateway that is up but follows nothing is found out', async () => {
    const port = await freePort();
    const gw = await lab.spawn(lab.gatewayArgv(port, ['--no-sse']), 'listening');
    // A client of the daemon's TCP port (as the relay's guests are) is not the gateway's stream.
    const tcpClient = connect(lab.tcpPort, '127.0.0.1');
    await new Promise((resolve) => tcpClient.once('connect', resolve));
    const base = lab.baseConfig();
    const file = lab.writeConfig({ ...base, gateway: { address: `127.0.0.1:${port}` } }, 'gw.json');
    const r = await healthCheck(['--json', '--config', file]);
    expect(r.code).toBe(2);
    expect((JSON.parse(r.stdout) as HealthReport).checks.find((x) => x.name === 'gateway_plugin')).toMatchObject({
      status: 'failed',
      detail: `no consumer holds a connection to the daemon on 127.0.0.1:${lab.httpPort}`,
    });
    tcpClient.destroy();
    gw.kill();
    const down = await healthCheck(['--json', '--config', file]);
    expect((JSON.parse(down.stdout) as HealthReport).checks.find((x) => x.name === 'gateway_plugin')!.detail).toBe(
      `the gateway 127.0.0.1:${port} is down`,
    );
  });

  it('a daemon that accepts but never answers is a failed signal_port, within the timeouts', async () => {
    daemon.kill('SIGSTOP'); // alive, listening, never answering
    try {
      const t0 = Date.now();
      const r = await healthCheck(['--json', '--config', lab.writeConfig(lab.baseConfig())]);
      expect(r.code).toBe(2);
      const c = (JSON.parse(r.stdout) as HealthReport).checks[0]!;
      expect(c).toMatchObject({ name: 'signal_port', status: 'failed' });
      expect(c.detail).toContain('no answer within 1000 ms');
      expect(Date.now() - t0).toBeLessThan(20_000); // bounded by the timeouts, not hung
    } finally {
      daemon.kill('SIGCONT');
    }
  });
});

describe('when the check cannot run (exit 3)', () => {
  let lab: Lab;
  beforeAll(async () => {
    lab = await Lab.create();
  });
  afterAll(() => lab.cleanup());

  it.each([
    ['a missing file', null, /nope\.json: no such configuration file/],
    ['text that is not JSON', '{ "daemon": ', /bad\.json: not valid JSON/],
    ['an unknown key', '{ "deamon": {} }', /deamon/],
    ['a wrong type', '{ "timeouts": { "checkMs": "fast" } }', /timeouts\.checkMs/],
    ['a bad address', '{ "daemon": { "http": "localhost" } }', /daemon\.http/],
    ['a bad storm pattern', '{ "gateway": { "storm": { "pattern": "(" } } }', /gateway\.storm\.pattern/],
  ])('%s', async (_what, text, message) => {
    const file = text === null ? lab.path('nope.json') : lab.writeConfig(text, 'bad.json');
    const r = await healthCheck(['--config', file]);
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('--json prints {"error", "exitCode": 3} for a configuration it cannot use (and --quiet still nothing)', async () => {
    const file = lab.writeConfig('{ "timeouts": { "checkMs": "fast" } }', 'bad.json');
    const r = await healthCheck(['--json', '--config', file]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout)).toEqual({ error: expect.stringMatching(/bad\.json.*timeouts\.checkMs/), exitCode: 3 });
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    const quiet = await healthCheck(['--json', '--quiet', '--config', file]);
    expect(quiet).toEqual({ code: 3, stdout: '', stderr: '' });
    const usage = await healthCheck(['--json', '--no-such-flag']);
    expect(usage.code).toBe(3);
    expect(JSON.parse(usage.stdout)).toEqual({ error: expect.stringContaining('--no-such-flag'), exitCode: 3 });
  });

  it('another run holds the lock: exits at once, says so, and logs it', async () => {
    const file = lab.writeConfig(lab.baseConfig());
    const holder = await lab.spawn([NODE, fixture('listen.mjs'), '127.0.0.1', '0'], 'listening');
    const lock = lab.path('state/health-check.lock');
    // The first run creates the state directory; then a live process "holds" the lock.
    await healthCheck(['--quiet', '--config', file]);
    writeFileSync(lock, `${holder.pid}\n`);
    const t0 = Date.now();
    const r = await healthCheck(['--json', '--config', file]);
    expect(r.code).toBe(3);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.stderr).toContain(`another health check (pid ${holder.pid}) is running`);
    expect(JSON.parse(r.stdout)).toEqual({ error: expect.stringContaining('another health check'), exitCode: 3 });
    expect(lab.reports().at(-1)).toMatchObject({ exitCode: 3, error: expect.stringContaining(`pid ${holder.pid}`) });
    expect(readFileSync(lock, 'utf8')).toBe(`${holder.pid}\n`); // not taken from a live holder

    // A lock left by a run that died is taken over; the lock is gone after the run.
    holder.kill('SIGKILL');
    await new Promise((r) => holder.once('exit', r));
    const again = await healthCheck(['--quiet', '--config', file]);
    expect(again.code).toBe(2); // it ran: no daemon in this lab
    expect(existsSync(lock)).toBe(false);
  });
});

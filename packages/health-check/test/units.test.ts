import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { type HealthReport, lineTime } from '@vigil/shared-types';
import { runsProgram } from '@vigil/shared-types/node';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { portOf, withPort } from '../src/checks/index.js';
import { accountInArgv } from '../src/checks/ours.js';
import { resolveConfig, stateHome } from '../src/config.js';
import { ConfigError, LockedError } from '../src/errors.js';
import { tailLines } from '../src/io/files.js';
import { formatReport, takeLock } from '../src/run.js';

const tmp = tmpDir('vigil-health-unit-');
afterAll(() => tmp.cleanup());

describe('ports in a flow configuration value', () => {
  it.each([
    [8080, 8080],
    ['8080', 8080],
    ['127.0.0.1:8080', 8080],
    ['http://127.0.0.1:8080', 8080],
    ['http://127.0.0.1:8080/api/v1?x=1', 8080],
    ['http://[::1]:18080#frag', 18080],
    ['localhost', null],
    [true, null],
    [8080.5, null],
  ])('%j → %j', (value, port) => expect(portOf(value)).toBe(port));

  it.each([
    [18080, 8080],
    ['18080', '8080'],
    ['127.0.0.1:18080', '127.0.0.1:8080'],
    ['http://127.0.0.1:18080/api', 'http://127.0.0.1:8080/api'],
    ['http://[::1]:18080', 'http://[::1]:8080'],
  ])('%j keeps its form pointing at 8080: %j', (value, patched) => {
    expect(withPort(value, 8080)).toEqual(patched);
    expect(portOf(withPort(value, 8080))).toBe(8080);
  });
});

describe('lineTime (Unix seconds) on the lines the checks read', () => {
  const t = Date.parse('2026-11-22T10:00:00.500Z') / 1000;
  it.each([
    ['{"ts":1795341600.5,"msg":"x"}', 1795341600.5],
    ['{"ts":1795341600500,"msg":"x"}', 1795341600.5],
    ['{"time":"2026-11-22T10:00:00.500Z"}', t],
    ['{"timestamp":"2026-11-22T10:00:00.500Z"}', t],
    ['2026-11-22T10:00:00.500Z websocket connected', t],
    ['[2026-11-22 10:00:00.500Z] websocket connected', t],
    ['2026-11-22T11:00:00.500+01:00 websocket connected', t],
    ['websocket connected', null],
    ['{"msg":"no time"}', null],
    ['{broken json', null],
  ])('%s', (line, seconds) => expect(lineTime(line)).toBe(seconds));
});

describe('runsProgram', () => {
  it.each([
    [['/usr/local/bin/signal-daemon', '--account', '+1'], true],
    [['/usr/bin/node', '/opt/vigil/packages/signal-daemon/bin/signal-daemon.js', '--account', '+1'], true],
    [['node', '--enable-source-maps', '/x/signal-daemon.mjs'], true],
    [['tail', '-f', '/var/log/signal-daemon.log'], false],
    [['vim', 'signal-daemon.js'], false],
    [['node', '/x/health-check.js', '--config', 'signal-daemon.json'], false],
    [['/usr/bin/node', '/x/scripts/start.mjs', 'signal-daemon'], false],
    [[], false],
  ])('%j → %s', (argv, expected) => expect(runsProgram(argv, 'signal-daemon')).toBe(expected));
});

describe('accountInArgv (as the daemon and signal-cli read -a, --account)', () => {
  it.each([
    [['node', '/x/signal-daemon.js', '--account', '+15550000001', '--http', ':8080'], '+15550000001'],
    [['node', '/x/signal-daemon.js', '--account=+15550000002'], '+15550000002'],
    [['signal-daemon', '-a', '+15550000003'], '+15550000003'],
    [['signal-daemon', '-a+15550000004'], '+15550000004'],
    [['signal-cli', '-a', '+15550000005', 'daemon', '--http'], '+15550000005'],
    [['signal-daemon', '-a', '+1', '--account', '+15550000006'], '+15550000006'],
    [['signal-daemon', '--http', ':8080', '--', '--account', '+1'], undefined],
    [['node', '--abort-on-uncaught-exception', '/x/signal-daemon.js'], undefined],
    [['signal-daemon', '--account'], undefined],
    [['signal-daemon', '--account='], undefined],
    [['signal-daemon', '--accounts', '+1'], undefined],
  ])('%j → %s', (argv, expected) => expect(accountInArgv(argv)).toBe(expected));
});

describe('tailLines', () => {
  it('reads the end of a large file, dropping the partial first line', () => {
    const file = join(tmp.dir, 'big.log');
    writeFileSync(file, `${'x'.repeat(100)}\n${Array.from({ length: 10 }, (_, i) => `line ${i}`).join('\n')}\n`);
    expect(tailLines(file, 40)).toEqual(['line 5', 'line 6', 'line 7', 'line 8', 'line 9', '']);
    expect(tailLines(file).length).toBe(12);
    expect(tailLines(join(tmp.dir, 'absent.log'))).toEqual([]);
  });
});

describe('resolveConfig', () => {
  it('the defaults: the vigil ports, nothing else configured, the lock beside the health log', () => {
    const c = resolveConfig({ healthLog: '/var/tmp/v/health.log' });
    expect(c.daemon).toEqual({ http: { host: '127.0.0.1', port: 8080 }, program: 'signal-daemon', processMatch: [] });
    expect(c.retiredPorts).toEqual([18081, 18082]);
    expect(c.relay).toBeUndefined();
    expect(c.gateway).toBeUndefined();
    expect(c.flowConfig).toBeUndefined();
    expect(c.lockFile).toBe('/var/tmp/v/health-check.lock');
    expect(c.timeouts).toEqual({ checkMs: 3000, fixMs: 15000, runMs: 30000 });
    expect(c.outbound).toEqual({ maxAgeHours: 24 });
  });

  it('the storm defaults when a gateway is configured', () => {
    expect(resolveConfig({ gateway: {} }).gateway).toEqual({
      address: { host: '127.0.0.1', port: 4077 },
      storm: { pattern: 'websocket (connected|opened|connection)', threshold: 30, windowMinutes: 15 },
    });
  });

  it('refuses a probe with nobody to send to, and names the problem', () => {
    expect(() => resolveConfig({ outbound: { probe: { message: 'x' } } })).toThrow(
      new ConfigError('invalid configuration: outbound.probe: set recipient or noteToSelf'),
    );
  });

  it('stateHome follows XDG_STATE_HOME when it is absolute', () => {
    expect(stateHome({ XDG_STATE_HOME: '/s' })).toBe('/s/vigil');
    expect(stateHome({ XDG_STATE_HOME: 'relative' })).toMatch(/\/\.local\/state\/vigil$/);
  });
});

describe('the lock', () => {
  it('one holder at a time; released only by its holder; a dead holder is taken over', async () => {
    const file = join(tmp.dir, 'state', 'lock');
    const release = await takeLock(file);
    expect(readFileSync(file, 'utf8')).toBe(`${process.pid}\n`);
    release();
    expect(existsSync(file)).toBe(false);
    // Another live process (this one's parent) holds it: refused, exit 3, and left alone.
    writeFileSync(file, `${process.ppid}\n`);
    await expect(takeLock(file)).rejects.toThrow(LockedError);
    await expect(takeLock(file)).rejects.toMatchObject({
      exitCode: 3,
      message: `another health check (pid ${process.ppid}) is running`,
    });
    release(); // not ours: kept
    expect(readFileSync(file, 'utf8')).toBe(`${process.ppid}\n`);
    writeFileSync(file, '999999999\n'); // no such process
    const taken = await takeLock(file);
    taken();
    expect(existsSync(file)).toBe(false);
  });
});

const ESC = String.fromCharCode(27);

describe('formatReport', () => {
  const report: HealthReport = {
    ts: 1,
    fix: true,
    durationMs: 12,
    exitCode: 2,
    checks: [
      {
        name: 'signal_port',
        status: 'healed',
        detail: 'was down; now up',
        durationMs: 3,
        fix: { action: 'relaunch the daemon', ok: true, detail: '' },
      },
      {
        name: 'relay_link',
        status: 'failed',
        detail: 'refused',
        durationMs: 1,
        fix: { action: 'restart the relay', ok: false, detail: 'rc 1' },
      },
      { name: 'gateway_plugin', status: 'skipped', detail: 'no flow gateway configured', durationMs: 0 },
    ],
  };

  it('a table with the fix under its check and the verdict last', () => {
    expect(formatReport(report, false)).toBe(
      [
        'check           status   detail',
        'signal_port     healed   was down; now up',
        '                         fix: relaunch the daemon',
        'relay_link      failed   refused',
        '                         fix: restart the relay (failed: rc 1)',
        'gateway_plugin  skipped  no flow gateway configured',
        '',
        'manual intervention required (exit 2, 12 ms)',
        '',
      ].join('\n'),
    );
  });

  it('colours the status only when asked', () => {
    const coloured = formatReport(report, true);
    expect(coloured).toContain('\x1b[33mhealed ');
    expect(coloured).toContain('\x1b[31mfailed ');
    expect(coloured.replace(new RegExp(`${ESC}\\[\\d+m`, 'g'), '')).toBe(formatReport(report, false));
  });
});

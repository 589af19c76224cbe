import { mkdirSync, writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { HealthReport } from '@vigil/shared-types';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import type { ServiceStatus } from '../src/control.js';
import { homePaths } from '../src/paths.js';
import {
  describeGuardianEvent,
  describeHealthReport,
  duration,
  lastGuardianEvent,
  lastHealthReport,
  statusScreen,
} from '../src/status.js';

const NOW = Date.parse('2026-01-02T03:04:05Z');
const iso = (secondsAgo: number) => new Date(NOW - secondsAgo * 1000).toISOString();
const svc = (name: ServiceStatus['name'], over: Partial<ServiceStatus> = {}): ServiceStatus => ({
  name,
  state: 'running',
  pid: 100,
  startedAt: iso(65),
  starts: 1,
  restarts: 0,
  lastExit: null,
  ...over,
});
const report = (over: Partial<HealthReport> = {}): HealthReport => ({
  ts: NOW / 1000 - 120,
  fix: true,
  durationMs: 12,
  exitCode: 0,
  checks: [{ name: 'signal_port', status: 'ok', detail: '', durationMs: 1 }],
  ...over,
});

describe('vigil status', () => {
  const home = tmpDir('vigil-status-');
  afterAll(() => home.cleanup());

  it('durations as a person reads them', () => {
    expect(duration(0)).toBe('0 s');
    expect(duration(59.9)).toBe('59 s');
    expect(duration(65)).toBe('1 min 5 s');
    expect(duration(120)).toBe('2 min');
    expect(duration(3 * 3600 + 600)).toBe('3 h 10 min');
    expect(duration(2 * 86_400 + 3600)).toBe('2 d 1 h');
  });

  it('one screen: each service with state, pid, uptime, restarts and last exit; the guardian; the health check', () => {
    const lines = statusScreen(
      {
        supervisor: { pid: 42, home: '/h', startedAt: iso(3700) },
        services: [
          svc('signal-daemon', { pid: 101 }),
          svc('inference-server', {
            pid: 202,
            startedAt: iso(5),
            starts: 3,
            restarts: 2,
            lastExit: { code: null, signal: 'SIGKILL', at: iso(6) },
          }),
          svc('inference-fallback', { state: 'stopped', pid: null, startedAt: null, starts: 0 }),
        ],
        guardian: { ts: NOW / 1000 - 3, level: 'info', event: 'probe_ok', probe_ms: 41, agent: 'inference-server' },
        health: report(),
        statusPage: 'http://127.0.0.1:8099/',
      },
      '/h',
      NOW,
    );
    expect(lines).toEqual([
      'vigil running from /h (supervisor pid 42, up 1 h 1 min)',
      '',
      '  service             state    pid  uptime     restarts  last exit',
      '  signal-daemon       running  101  1 min 5 s  0         -',
      `  inference-server    running  202  5 s        2         SIGKILL at ${iso(6)}`,
      '  inference-fallback  stopped  -    -          0         -',
      '',
      '  guardian:  probe_ok 3 s ago: probe_ms 41, agent inference-server',
      '  health:    healthy (exit 0) 2 min ago',
      '  page:      http://127.0.0.1:8099/',
    ]);
  });

  it('one line per consumer of the daemon: connected or away, held count, oldest held', () => {
    const base = {
      supervisor: { pid: 42, home: '/h', startedAt: iso(60) },
      services: [],
      guardian: null,
      health: null,
    };
    const lines = statusScreen(
      {
        ...base,
        consumers: [
          { name: 'sse', connected: true, connections: 1, held: 0, oldestHeldAgeS: null, lastSeenAt: NOW },
          { name: 'relay', connected: false, connections: 0, held: 12, oldestHeldAgeS: 41, lastSeenAt: NOW - 180_000 },
          { name: 'agent', connected: false, connections: 0, held: 3, oldestHeldAgeS: 5, lastSeenAt: null },
        ],
      },
      '/h',
      NOW,
    );
    expect(lines.slice(-3)).toEqual([
      '  consumer:  sse connected, 0 held',
      '  consumer:  relay away (last seen 3 min ago), 12 held, oldest 41 s',
      '  consumer:  agent away (never connected), 3 held, oldest 5 s',
    ]);
    expect(statusScreen({ ...base, consumers: null }, '/h', NOW).at(-1)).toBe('  consumer:  the daemon did not answer');
    expect(statusScreen(base, '/h', NOW).at(-1)).toMatch(/^ {2}page:/);
  });

  it('a warning event names its level; a health check that repaired or failed names the checks', () => {
    expect(describeGuardianEvent({ ts: NOW / 1000 - 1, level: 'warn', event: 'probe_fail', consecutive: 1 }, NOW)).toBe(
      'probe_fail (warn) 1 s ago: consecutive 1',
    );
    const r = report({
      exitCode: 2,
      checks: [
        { name: 'signal_port', status: 'healed', detail: 'restarted', durationMs: 1 },
        { name: 'relay_link', status: 'failed', detail: 'connection refused', durationMs: 1 },
        { name: 'gateway_plugin', status: 'skipped', detail: 'not configured', durationMs: 1 },
      ],
    });
    expect(describeHealthReport(r, NOW)).toBe(
      'needs you (exit 2) 2 min ago: signal_port healed (restarted); relay_link failed (connection refused)',
    );
  });

  it('reads the last guardian event and the last health report from the home', () => {
    const paths = homePaths(home.dir);
    expect(lastGuardianEvent(paths)).toBeNull();
    expect(lastHealthReport(paths)).toBeNull();
    mkdirSync(`${home.dir}/logs`, { recursive: true });
    mkdirSync(`${home.dir}/state`, { recursive: true });
    writeFileSync(
      paths.log('guardian'),
      '{"ts":1,"level":"info","event":"started"}\n{"ts":2,"level":"info","event":"probe_ok"}\nguardian: a crash line\n',
    );
    writeFileSync(paths.healthLog, `${JSON.stringify(report({ exitCode: 1 }))}\n${JSON.stringify(report())}\n`);
    expect(lastGuardianEvent(paths)).toMatchObject({ event: 'probe_ok', ts: 2 });
    expect(lastHealthReport(paths)).toMatchObject({ exitCode: 0 });
  });
});

/**
 * The supervisor with real child processes (a small stand-in service): a service that exits by
 * itself is started again with the installed units' policy (one line each time, a backoff, never
 * after exit 2 or 78); what is stopped on purpose stays stopped; the inference primary is not
 * started again while the fallback serves; a process that does not end on SIGTERM (it ignores it,
 * or it is stopped with SIGSTOP) is killed after the stop timeout, and what it started goes with it.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { pidAlive } from '@vigil/shared-types/node';
import { until } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { type HomePaths, homePaths } from '../src/paths.js';
import { makeHome } from '../src/prepare.js';
import { decideRestart, RESTART_POLICY } from '../src/restart-policy.js';
import { SERVICE_NAMES, type ServiceName, type ServiceSpec } from '../src/services.js';
import { Supervisor, type SupervisorOptions } from '../src/supervisor.js';
import { ServiceWatchdog } from '../src/watchdog.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/service.mjs', import.meta.url));

let home: { dir: string; cleanup: () => void };
let paths: HomePaths;
let said: string[];
let supervisor: Supervisor | null;

beforeEach(() => {
  home = tmpDir('vigil-supervisor-');
  paths = homePaths(home.dir);
  makeHome(paths);
  said = [];
  supervisor = null;
});

afterEach(async () => {
  await supervisor?.stopAll();
  home.cleanup();
});

/** A supervisor whose services run the stand-in, each in the mode given (default serve). */
function supervise(modes: Partial<Record<ServiceName, string[]>>, options: SupervisorOptions = {}): Supervisor {
  const spec = (name: ServiceName): ServiceSpec => ({
    name,
    argv: [FIXTURE, ...(modes[name] ?? ['serve'])],
    autostart: true,
    ready: { kind: 'log', pattern: /^up / },
    readyTimeoutMs: 5000,
    serves: name,
  });
  const specs = Object.fromEntries(SERVICE_NAMES.map((n) => [n, spec(n)])) as Record<ServiceName, ServiceSpec>;
  supervisor = new Supervisor(specs, paths, (l) => said.push(l), options);
  return supervisor;
}

const state = (s: Supervisor, name: ServiceName) => s.status().find((x) => x.name === name)!;
/** Started and said so in its log (its signal handlers are in place). */
async function up(s: Supervisor, name: ServiceName): Promise<number> {
  const pid = s.start(name)!;
  await until(`${name} up`, () => readFileSync(paths.log(name), 'utf8').includes(`up ${pid}`));
  return pid;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the restart policy (pure)', () => {
  it.each([
    ['a crash after a short run', { code: 1, signal: null }, 500, 0, { restart: true, delayMs: 1000, attempt: 1 }],
    ['the second in a row', { code: null, signal: 'SIGKILL' }, 500, 1, { restart: true, delayMs: 2000, attempt: 2 }],
    [
      'the sixth in a row: capped at 30 s',
      { code: 1, signal: null },
      500,
      5,
      { restart: true, delayMs: 30_000, attempt: 6 },
    ],
    [
      'after 60 s up: the count starts again',
      { code: 1, signal: null },
      60_000,
      7,
      { restart: true, delayMs: 1000, attempt: 1 },
    ],
    [
      'exit 0 is restarted too (Restart=always)',
      { code: 0, signal: null },
      500,
      0,
      { restart: true, delayMs: 1000, attempt: 1 },
    ],
    ['exit 2: manual intervention', { code: 2, signal: null }, 500, 0, { restart: false }],
    ['exit 78: bad configuration', { code: 78, signal: null }, 500, 3, { restart: false }],
  ])('%s', (_, exit, upMs, failures, expected) => {
    expect(decideRestart(exit, upMs, failures, RESTART_POLICY)).toMatchObject(expected);
  });
});

describe('the supervisor restarts what exits by itself', () => {
  it('kill -9: one line, started again after 1 s, shown with its restarts', async () => {
    const s = supervise({});
    const old = await up(s, 'signal-daemon');
    process.kill(old, 'SIGKILL');
    await until('the exit seen', () => s.pidOf('signal-daemon') === null);
    expect(said).toEqual(['vigil: signal-daemon exited (signal SIGKILL); restarting in 1 s (restart 1)']);
    expect(state(s, 'signal-daemon')).toMatchObject({ state: 'restarting', restartAt: expect.any(String) });
    await until('started again', () => s.pidOf('signal-daemon') !== null, 5000);
    expect(s.pidOf('signal-daemon')).not.toBe(old);
    expect(state(s, 'signal-daemon')).toMatchObject({ state: 'running', restarts: 1, restartAt: null });
    expect(said).toHaveLength(1);
  });

  it('exits in a row: the delay doubles up to the cap', async () => {
    const s = supervise(
      { 'tcp-relay': ['exit', '1'] },
      { restartPolicy: { firstDelayMs: 50, maxDelayMs: 200, resetAfterMs: 60_000 } },
    );
    s.start('tcp-relay');
    await until('four restarts', () => said.length >= 5, 10_000);
    expect(said.slice(0, 5)).toEqual([
      'vigil: tcp-relay exited (code 1); restarting in 0.05 s (restart 1)',
      'vigil: tcp-relay exited (code 1); restarting in 0.1 s (restart 2)',
      'vigil: tcp-relay exited (code 1); restarting in 0.2 s (restart 3)',
      'vigil: tcp-relay exited (code 1); restarting in 0.2 s (restart 4)',
      'vigil: tcp-relay exited (code 1); restarting in 0.2 s (restart 5)',
    ]);
    await s.stop('tcp-relay'); // also cancels the restart under way
    const n = said.length;
    await sleep(400);
    expect(said).toHaveLength(n);
    expect(state(s, 'tcp-relay').state).toBe('stopped');
  });

  it.each([
    ['78', 'exit 78 means bad usage or configuration, which a restart cannot fix'],
    ['2', 'exit 2 means manual intervention required'],
  ])('exit %s: not restarted, said once, shown failed', async (code, reason) => {
    const s = supervise(
      { 'signal-daemon': ['exit', code] },
      { restartPolicy: { ...RESTART_POLICY, firstDelayMs: 50 } },
    );
    s.start('signal-daemon');
    await until('the exit seen', () => said.length > 0);
    await sleep(300);
    expect(said).toEqual([
      `vigil: signal-daemon exited (code ${code}); not restarted: ${reason}. See ${paths.log('signal-daemon')}; then node packages/stack/bin/vigil.js --home ${home.dir} start signal-daemon`,
    ]);
    expect(state(s, 'signal-daemon')).toMatchObject({ state: 'failed', starts: 1, lastExit: { code: Number(code) } });
  });

  it('a service stopped on purpose stays stopped', async () => {
    const s = supervise({}, { restartPolicy: { ...RESTART_POLICY, firstDelayMs: 50 } });
    const pid = await up(s, 'guardian');
    expect(await s.handle({ action: 'stop', service: 'guardian' })).toEqual({ ok: true });
    expect(pidAlive(pid)).toBe(false);
    await sleep(300);
    expect(s.pidOf('guardian')).toBeNull();
    expect(said).toEqual([]);
  });

  it('the inference primary is not started again while the fallback lock is present, nor the fallback without it', async () => {
    const s = supervise({}, { restartPolicy: { ...RESTART_POLICY, firstDelayMs: 50 } });
    const primary = await up(s, 'inference-server');
    writeFileSync(paths.fallbackLock, 'Segmentation fault\n');
    process.kill(primary, 'SIGKILL');
    await until('the decision said', () => said.length === 2);
    expect(said[1]).toBe(
      `vigil: inference-server not restarted: the fallback lock ${paths.fallbackLock} is present; the guardian decides which inference backend serves`,
    );
    const fallback = await up(s, 'inference-fallback');
    expect(s.pidOf('inference-server')).toBeNull();
    // The operator's restore removed the lock: a fallback that dies now is not brought back.
    writeFileSync(paths.fallbackLock, '');
    await s.stop('inference-fallback');
    expect(pidAlive(fallback)).toBe(false);
    await up(s, 'inference-fallback');
    rmSync(paths.fallbackLock);
    process.kill(s.pidOf('inference-fallback')!, 'SIGKILL');
    await until('the decision said', () => said.length === 4);
    expect(said[3]).toMatch(/^vigil: inference-fallback not restarted: the fallback lock is gone/);
    await sleep(100);
    expect(s.pidOf('inference-fallback')).toBeNull();
    expect(s.pidOf('inference-server')).toBeNull();
  });
});

describe('a restart replaces a hung process', () => {
  it('a process that ignores SIGTERM is killed after the stop timeout, and the new one started', async () => {
    const s = supervise({ 'inference-server': ['ignore-term'] }, { stopTimeoutMs: 500 });
    const old = await up(s, 'inference-server');
    const reply = await s.handle({ action: 'restart', service: 'inference-server' });
    expect(pidAlive(old)).toBe(false);
    expect(reply).toEqual({ ok: true, pid: s.pidOf('inference-server') });
    expect(reply).not.toMatchObject({ pid: old });
    expect(readFileSync(paths.log('inference-server'), 'utf8')).toContain('SIGTERM ignored');
    expect(said).toEqual([
      `vigil: inference-server (pid ${old}) did not end within 0.5 s of SIGTERM; killing it (SIGKILL)`,
    ]);
  });

  it('a process stopped with SIGSTOP is replaced (SIGCONT lets it act on SIGTERM)', async () => {
    const s = supervise({}, { stopTimeoutMs: 60_000 });
    const old = await up(s, 'inference-server');
    process.kill(old, 'SIGSTOP');
    const reply = await s.handle({ action: 'restart', service: 'inference-server' });
    expect(pidAlive(old)).toBe(false);
    expect(reply).toMatchObject({ ok: true, pid: expect.any(Number) });
    // It ended on SIGTERM (its own graceful shutdown), well within the stop timeout.
    expect(readFileSync(paths.log('inference-server'), 'utf8')).toContain('SIGTERM: exiting');
    expect(said).toEqual([]);
  });

  it('a process stopped with SIGSTOP that ignores SIGTERM is killed after the stop timeout', async () => {
    const s = supervise({ 'signal-daemon': ['ignore-term'] }, { stopTimeoutMs: 300 });
    const old = await up(s, 'signal-daemon');
    process.kill(old, 'SIGSTOP');
    await s.stop('signal-daemon');
    expect(pidAlive(old)).toBe(false);
    expect(said).toEqual([
      `vigil: signal-daemon (pid ${old}) did not end within 0.3 s of SIGTERM; killing it (SIGKILL)`,
    ]);
  });

  it('what a service started in its process group goes with it', async () => {
    const file = `${home.dir}/child.pid`;
    const s = supervise({ 'tcp-relay': ['with-child', file] }, { stopTimeoutMs: 500 });
    await up(s, 'tcp-relay');
    await until('the child started', () => {
      try {
        return Number(readFileSync(file, 'utf8')) > 0;
      } catch {
        return false;
      }
    });
    const child = Number(readFileSync(file, 'utf8'));
    expect(pidAlive(child)).toBe(true);
    await s.stop('tcp-relay');
    await until('the child gone', () => !pidAlive(child), 3000);
  });
});

describe('the watchdog (issue 30): what systemd does with WatchdogSec=', () => {
  it('a service whose beats stop (SIGSTOP) is killed and restarted with the same backoff as an exit', async () => {
    const s = supervise({ 'signal-daemon': ['notify'] }, { watchdogMs: 1000 });
    const pid = await up(s, 'signal-daemon');
    // Beats at half the period keep it alive well past the period.
    await new Promise((r) => setTimeout(r, 3000));
    expect(s.pidOf('signal-daemon')).toBe(pid);
    expect(said.filter((l) => l.includes('watchdog'))).toEqual([]);
    process.kill(pid, 'SIGSTOP');
    await until('a restart', () => (s.pidOf('signal-daemon') ?? pid) !== pid, 15_000);
    expect(pidAlive(pid)).toBe(false);
    expect(said[0]).toMatch(
      new RegExp(
        `^vigil: signal-daemon \\(pid ${pid}\\) watchdog expired: no WATCHDOG=1 for \\d+ s \\(period 1 s\\); its last status: standing in; killing it \\(SIGKILL\\)$`,
      ),
    );
    expect(said[1]).toBe('vigil: signal-daemon exited (signal SIGKILL); restarting in 1 s (restart 1)');
    expect(state(s, 'signal-daemon')).toMatchObject({ state: 'running', starts: 2, restarts: 1 });
  });

  it('a service that never said READY=1 (no notifier) is not watched', async () => {
    const s = supervise({ 'signal-daemon': ['serve'] }, { watchdogMs: 1000 });
    const pid = await up(s, 'signal-daemon');
    await new Promise((r) => setTimeout(r, 3000));
    expect(s.pidOf('signal-daemon')).toBe(pid);
    expect(said).toEqual([]);
  });
});

describe('ServiceWatchdog (pure)', () => {
  it('arms at READY=1, expires once past the period or at WATCHDOG=trigger, disarms at STOPPING=1', () => {
    const w = new ServiceWatchdog(1000, null);
    expect(w.expired(10_000)).toBeNull(); // not armed: no READY=1 yet
    w.take('READY=1', 0);
    w.take('STATUS=serving', 0);
    w.take('WATCHDOG=1', 900);
    expect(w.expired(1800)).toBeNull();
    expect(w.expired(1901)).toBe('no WATCHDOG=1 for 1 s (period 1 s); its last status: serving');
    expect(w.expired(5000)).toBeNull(); // said once

    const t = new ServiceWatchdog(1000, null);
    t.take('READY=1', 0);
    t.take('STATUS=slot 0 has made no progress for 15 s', 10);
    t.take('WATCHDOG=trigger', 10);
    expect(t.expired(20)).toBe('it triggered its watchdog: slot 0 has made no progress for 15 s');

    const s = new ServiceWatchdog(1000, null);
    s.take('READY=1', 0);
    s.take('STOPPING=1', 10);
    expect(s.expired(60_000)).toBeNull();
  });
});

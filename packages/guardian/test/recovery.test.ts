/**
 * The guardian under faults, as real processes (issues 18 and 19): a crashed or stopped server is
 * not "busy"; a loading server gets its start-up grace after a restart or a restore (no restart
 * loop); a fallback that never serves is `fallback_failed`; a damaged state file is moved aside and
 * said (`state_reset`); a state lock left to a reused pid does not block; every event line's `ts`
 * has a fraction.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { fixture } from './fixture.js';
import { exited, guardian, NODE, nowS, sleep, spawnGuardian } from './helpers.js';

const fx = fixture();
/** A `command` manager whose every action succeeds at once. */
const OK_COMMANDS = Object.fromEntries(['restart', 'stop', 'start'].map((op) => [op, [NODE, '-e', 'process.exit(0)']]));
const success = (at: number) => `${JSON.stringify({ ts: at, level: 'info', msg: 'request completed', status: 200 })}\n`;

describe('busy deferral only for a server that answers (issue 18.1)', () => {
  it('a server killed -9 right after a client success: the next tick probes and counts, no probe_skip_busy', async () => {
    const sc = fx.scenario('killed');
    const s = await sc.fault();
    const access = join(sc.dir, 'access.log');
    const config = sc.config(s.port, { primary: { accessLog: access } });
    appendFileSync(access, success(nowS() - 5));
    s.child.kill('SIGKILL');
    await exited(s.child);
    const t0 = nowS();
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    const events = sc.events(t0);
    expect(events.map((e) => e.event)).toEqual(['probe_fail']);
    expect(events[0]).toMatchObject({ consecutive: 1, snippet: expect.stringContaining('ECONNREFUSED') });
    // The second tick restarts, as the spec's table says.
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.events(t0).map((e) => e.event)).toEqual(['probe_fail', 'probe_fail', 'restarting', 'restart_requested']);
  });

  it('a server stopped with SIGSTOP after a client success is not busy: probed and counted', async () => {
    const sc = fx.scenario('stopped');
    const s = await sc.fault();
    const access = join(sc.dir, 'access.log');
    const config = sc.config(s.port, { busyCheckS: 0.5, primary: { accessLog: access } });
    appendFileSync(access, success(nowS() - 3));
    process.kill(s.child.pid!, 'SIGSTOP');
    try {
      const t0 = nowS();
      expect((await guardian(['tick', '-c', config])).code).toBe(0);
      const events = sc.events(t0);
      expect(events.map((e) => e.event)).toEqual(['probe_fail']);
      expect(events[0]!.snippet).toMatch(/budget/);
    } finally {
      process.kill(s.child.pid!, 'SIGCONT');
    }
  });
});

describe("a model waiting for CPUs the host's other work holds (--worker-sched idle)", () => {
  it('probes that time out while the server says so are probe_waiting_cpu: not counted, no restart', async () => {
    const sc = fx.scenario('waiting-cpu');
    const s = await sc.fault();
    s.setMode('waiting_cpu');
    const config = sc.config(s.port, { probeBudgetS: 0.5 });
    const t0 = nowS();
    for (let i = 0; i < 3; i++) expect((await guardian(['tick', '-c', config])).code).toBe(0);
    const events = sc.events(t0);
    expect(events.map((e) => e.event)).toEqual(['probe_waiting_cpu', 'probe_waiting_cpu', 'probe_waiting_cpu']);
    expect(events[0]).toMatchObject({ level: 'warn', agent: 'inference-primary' });
    expect(events[0]!.detail).toMatch(/budget.*waiting for CPUs other processes hold/);
    // The same server hung without saying so: counted, and the second tick restarts it.
    s.setMode('hang');
    const t1 = nowS();
    for (let i = 0; i < 2; i++) expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.events(t1).map((e) => e.event)).toEqual(['probe_fail', 'probe_fail', 'restarting', 'restart_requested']);
  });
});

describe('start-up grace (issue 19.3)', () => {
  it('a model that loads for longer than one interval after a restart: probe_loading, no restart loop', async () => {
    const sc = fx.scenario('loading');
    const s = await sc.fault();
    s.setMode('500');
    // The restart "starts" a server that answers 503 model_loading until the test says it loaded.
    const restart = [NODE, '-e', `require('node:fs').writeFileSync(${JSON.stringify(s.modeFile)}, 'loading')`];
    const config = sc.config(s.port, {
      intervalS: 0.2,
      startGraceS: 30,
      primary: { service: { kind: 'command', restart } },
    });
    const t0 = nowS();
    const g = spawnGuardian(['run', '-c', config]);
    try {
      await sc.waitEvent('restart_requested');
      await sc.waitEvent('probe_loading', 5);
      s.setMode('ok');
      await sc.waitEvent('probe_ok');
      const names = sc.events(t0).map((e) => e.event);
      expect(names.filter((n) => n === 'restarting')).toHaveLength(1);
      expect(names).not.toContain('rate_limit');
      const after = names.slice(names.indexOf('restart_requested') + 1);
      expect(after.slice(0, 5)).toEqual([
        'probe_loading',
        'probe_loading',
        'probe_loading',
        'probe_loading',
        'probe_loading',
      ]);
      expect(after).not.toContain('probe_fail');
    } finally {
      g.kill('SIGTERM');
      await exited(g);
    }
  });

  it('restore with a running guardian: the restored primary, still starting, is not restarted', async () => {
    const sc = fx.scenario('restore');
    const s = await sc.fault();
    s.setMode('loading');
    const config = sc.config(s.port, {
      intervalS: 0.1,
      startGraceS: 30,
      // Still running when the restore comes, however long that takes to start: no rate limit first.
      maxRestarts: 1000,
      primary: { standalone: [NODE, '-e', 'process.exit(0)'], service: { kind: 'command', ...OK_COMMANDS } },
    });
    writeFileSync(join(sc.dir, 'fallback.lock'), '{"what":"fallback active"}\n');
    const g = spawnGuardian(['run', '-c', config]);
    try {
      await sc.waitEvent('probe_fail');
      const r = await guardian(['restore', '-c', config]);
      expect(r.code).toBe(0);
      const restored = (await sc.waitEvent('restored')).find((e) => e.event === 'restored')!;
      await sc.waitEvent('probe_loading', 5);
      const after = sc.events(restored.ts).map((e) => e.event);
      expect(after.slice(0, 6)).toEqual([
        'restored',
        'probe_loading',
        'probe_loading',
        'probe_loading',
        'probe_loading',
        'probe_loading',
      ]);
      expect(after).not.toContain('probe_fail');
      expect(after).not.toContain('restarting');
    } finally {
      g.kill('SIGTERM');
      await exited(g);
    }
  });
});

describe('fallback (issue 19.9)', () => {
  it('a fallback that never serves: fallback_failed at error level, no fallback_activated, exit 2', async () => {
    const sc = fx.scenario('fallback-failed');
    const s = await sc.fault();
    const log = join(sc.dir, 'primary.log');
    const config = sc.config(s.port, {
      startGraceS: 1,
      primary: { log, service: { kind: 'command', ...OK_COMMANDS } },
      fallback: {
        agent: 'inference-fallback',
        http: '127.0.0.1:9',
        service: { kind: 'command', start: [NODE, '-e', 'process.exit(0)'], stop: [NODE, '-e', '0'] },
      },
    });
    appendFileSync(log, `${JSON.stringify({ ts: nowS(), level: 'error', msg: 'Segmentation fault' })}\n`);
    const t0 = nowS();
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(2);
    const events = sc.events(t0);
    expect(events.map((e) => e.event)).toEqual(['fallback_failed']);
    expect(events[0]).toMatchObject({ level: 'error', detail: expect.stringContaining('start-up grace') });
    expect(JSON.parse(readFileSync(join(sc.dir, 'state.json'), 'utf8')).machine.alerting.reason).toBe(
      'fallback_failed',
    );
  });
});

describe('the state file and its lock (issue 19.6, 19.10)', () => {
  const damaged: [string, string][] = [
    ['empty', ''],
    ['garbage', '\u0000\u0000\u0000{"vers'],
    ['not its own', '{"hello":"world"}'],
    [
      'alerting.since 1e300',
      JSON.stringify({ version: 1, machine: { alerting: { reason: 'rate_limit', since: 1e300 } } }),
    ],
  ];
  it.each(damaged)(
    'a state file that is %s: moved aside, state_reset at error level, the tick goes on',
    async (name, text) => {
      const sc = fx.scenario(`damaged-${name.replace(/\W+/g, '-')}`);
      const s = await sc.fault();
      const config = sc.config(s.port);
      writeFileSync(join(sc.dir, 'state.json'), text);
      const t0 = nowS();
      const r = await guardian(['tick', '-c', config]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const events = sc.events(t0);
      expect(events.map((e) => e.event)).toEqual(['state_reset', 'probe_ok']);
      expect(events[0]).toMatchObject({ level: 'error', detail: expect.stringContaining('lost') });
      const aside = readdirSync(sc.dir).filter((f) => f.startsWith('state.json.damaged-'));
      expect(aside).toHaveLength(1);
      expect(readFileSync(join(sc.dir, aside[0]!), 'utf8')).toBe(text);
      expect(JSON.parse(readFileSync(join(sc.dir, 'state.json'), 'utf8')).version).toBe(1);
    },
  );

  it('keeps the alerting state when the event log says a person is needed', async () => {
    const sc = fx.scenario('damaged-alerting');
    const s = await sc.fault();
    const config = sc.config(s.port);
    const log = join(sc.dir, 'guardian.log');
    appendFileSync(log, `{"ts":${nowS() - 60},"level":"warn","event":"rate_limit"}\n`);
    writeFileSync(join(sc.dir, 'state.json'), '');
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(2);
    expect(sc.lines().map((e) => e.event)).toEqual(['rate_limit', 'state_reset']);
    expect(sc.lines()[1]!.detail).toMatch(/kept from the event log: rate_limit/);
    expect(s.received()).toEqual([]);
    // After the operator's reset it probes again.
    expect((await guardian(['reset', '-c', config])).code).toBe(0);
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'probe_ok' });
  });

  it('a state lock held by a live process that is not a guardian (a reused pid) does not block the tick', async () => {
    const sc = fx.scenario('foreign-lock');
    const s = await sc.fault();
    const config = sc.config(s.port);
    const other = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      writeFileSync(join(sc.dir, 'state.json.lock'), `${other.pid}\n`);
      const t = performance.now();
      const r = await guardian(['tick', '-c', config], {}, 15_000);
      expect(r.code).toBe(0);
      expect(performance.now() - t).toBeLessThan(10_000);
      expect(r.stderr).toMatch(
        new RegExp(`took over the state lock: pid ${other.pid} \\(sleep 60\\) is not a guardian`),
      );
      expect(existsSync(join(sc.dir, 'state.json.lock'))).toBe(false);
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe('event lines (issue 19.10)', () => {
  it('writes ts with a fraction on every line (three decimals, never a whole number)', async () => {
    const sc = fx.scenario('ts');
    const s = await sc.fault();
    const config = sc.config(s.port, { intervalS: 0.01 });
    const g = spawnGuardian(['run', '-c', config]);
    await sc.waitEvent('probe_ok', 60);
    g.kill('SIGTERM');
    await exited(g);
    await sleep(10);
    const lines = readFileSync(join(sc.dir, 'guardian.log'), 'utf8').trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(60);
    for (const line of lines) expect(line).toMatch(/^\{"ts":\d+\.\d{3},"level":"\w+","event":"\w+"/);
  });
});

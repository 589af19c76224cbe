/**
 * The guardian as a real process against the fault server (a real process too): probes and
 * their events, restarts through the `command` manager, the rate limit and its alerting state,
 * reset, busy deferral, the circuit breaker, and kill -9 at any point.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { fixture, startService } from './fixture.js';
import {
  baseConfig,
  exited,
  type FaultServer,
  freePort,
  guardian,
  NODE,
  nowS,
  readLines,
  SERVICE,
  sleep,
  spawnGuardian,
  waitFor,
  writeJson,
} from './helpers.js';

const fx = fixture();
const chatRequests = (s: FaultServer) => s.received().filter((r) => r.path === '/v1/chat/completions').length;

describe('probing', () => {
  it('logs probe_ok with probe_ms and agent for a real reply, as one JSON line with exactly those fields', async () => {
    const sc = fx.scenario('ok');
    const s = await sc.fault();
    const config = sc.config(s.port);
    const t0 = nowS();
    const r = await guardian(['tick', '-c', config]);
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
    const events = sc.events(t0);
    expect(events).toEqual([
      {
        ts: expect.any(Number),
        level: 'info',
        event: 'probe_ok',
        probe_ms: expect.any(Number),
        agent: 'inference-primary',
      },
    ]);
    // The state file is private and holds the counters.
    const state = JSON.parse(readFileSync(join(sc.dir, 'state.json'), 'utf8'));
    expect(state.machine).toMatchObject({ consecutive: 0, restarts: [], alerting: null });
    expect(readFileSync(join(sc.dir, 'state.json')).length).toBeGreaterThan(0);
  });

  it('writes events to stdout when no log file is configured', async () => {
    const sc = fx.scenario('stdout');
    const s = await sc.fault();
    const { logFile: _, ...config } = baseConfig(sc.dir, s.port);
    const r = await guardian(['tick', '-c', writeJson(join(sc.dir, 'g.json'), config)]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ level: 'info', event: 'probe_ok', agent: 'inference-primary' });
  });

  it('counts a failing model list as a probe failure and does not send the chat probe in that tick', async () => {
    const sc = fx.scenario('models');
    const s = await sc.fault();
    s.setMode('models_500');
    const config = sc.config(s.port, { modelListIntervalS: 60 });
    const t0 = nowS();
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.events(t0)).toEqual([
      expect.objectContaining({
        event: 'model_list_fail',
        level: 'warn',
        consecutive: 1,
        snippet: expect.stringMatching(/^HTTP 500: /),
      }),
    ]);
    expect(s.received().map((r) => r.path)).toEqual(['/v1/models']);
  });

  it('runs the canary on its cadence: a blank reply fails it though the probe passes', async () => {
    const sc = fx.scenario('canary');
    const s = await sc.fault();
    s.setMode('blank');
    const config = sc.config(s.port, { canaryIntervalS: 600 });
    const t0 = nowS();
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    const events = sc.events(t0);
    expect(events.map((e) => e.event)).toEqual(['probe_ok', 'canary_fail']);
    expect(events[1]).toMatchObject({ consecutive: 1, snippet: expect.stringContaining('"content":""') });
    s.setMode('ok');
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    // Not due again for 10 minutes: the next tick is the chat probe alone.
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok', 'canary_fail', 'probe_ok']);
  });
});

describe('restarts', () => {
  it('restarts a server whose chat completions hang while its model list answers, through the command manager', async () => {
    const sc = fx.scenario('hang');
    const port = await freePort();
    const service = sc.faultService('primary', port);
    const modeFile = join(sc.dir, 'primary.mode');
    writeFileSync(modeFile, 'hang');
    await startService(service);
    const pidBefore = readFileSync(join(sc.dir, 'primary.pid'), 'utf8');
    const config = sc.config(port, { probeBudgetS: 0.5, modelListIntervalS: 0.001, primary: { service } });
    const t0 = nowS();
    const g = spawnGuardian(['run', '-c', config]);
    try {
      await sc.waitEvent('restart_requested');
      const all = sc.events(t0);
      const events = all.slice(0, all.findIndex((e) => e.event === 'restart_requested') + 1);
      expect(events.map((e) => e.event)).toEqual([
        'model_list_ok',
        'probe_fail',
        'model_list_ok',
        'probe_fail',
        'restarting',
        'restart_requested',
      ]);
      expect(events[1]).toMatchObject({ consecutive: 1, snippet: 'no complete reply within the 0.5 s budget' });
      expect(events[1]!.probe_ms).toBeGreaterThanOrEqual(490);
      expect(events[3]).toMatchObject({ consecutive: 2 });
      expect(events[4]).toMatchObject({ level: 'warn', action: 'kickstart', agent: 'inference-primary' });
      expect(events[5]).toMatchObject({ level: 'info', rc: 0 });
      expect(sc.calls('primary')).toEqual(['start', 'restart']);
      expect(readFileSync(join(sc.dir, 'primary.pid'), 'utf8')).not.toBe(pidBefore);
      // Healed: the restarted server answers, and the guardian says so.
      writeFileSync(modeFile, 'ok');
      await sc.waitEvent('probe_ok');
      g.kill('SIGTERM');
      expect(await exited(g)).toEqual({ code: 0, signal: null });
    } finally {
      g.kill('SIGKILL');
    }
  });

  it('stops at the rate limit: the 4th restart within the window is refused, exit 2, and the state says so until reset', async () => {
    const sc = fx.scenario('storm');
    const s = await sc.fault();
    s.setMode('500');
    const record = [NODE, SERVICE, 'restart', '--dir', sc.dir, '--name', 'primary', '--rc', '0'];
    const config = sc.config(s.port, { intervalS: 0.05, primary: { service: { kind: 'command', restart: record } } });
    const t0 = nowS();
    const g = spawnGuardian(['run', '-c', config]);
    expect(await exited(g)).toEqual({ code: 2, signal: null });
    expect(g.output()).toMatch(
      /^guardian: manual intervention required \(rate_limit: 3 restarts of inference-primary within 300 s and it still fails .*\); once fixed, run `guardian reset --config .*g\.json`/m,
    );
    const events = sc.events(t0).map((e) => e.event);
    expect(events.filter((e) => e !== 'probe_fail')).toEqual([
      'restarting',
      'restart_requested',
      'restarting',
      'restart_requested',
      'restarting',
      'restart_requested',
      'rate_limit',
    ]);
    expect(events.at(-2)).toBe('probe_fail');
    expect(sc.calls('primary')).toEqual(['restart', 'restart', 'restart']);
    const state = JSON.parse(readFileSync(join(sc.dir, 'state.json'), 'utf8'));
    expect(state.machine.alerting).toMatchObject({ reason: 'rate_limit' });
    expect(state.machine.restarts).toHaveLength(3);

    // A guardian started in that state says so once (log and stderr), probes nothing, exits 2.
    const probes = chatRequests(s);
    const t1 = nowS();
    const again = await guardian(['tick', '-c', config]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('guardian: manual intervention required (rate_limit:');
    const third = await guardian(['run', '-c', config]);
    expect(third.code).toBe(2);
    expect(third.stderr).toContain('manual intervention required');
    expect(sc.events(t0).filter((e) => e.ts >= t1)).toEqual([
      expect.objectContaining({
        event: 'alerting',
        level: 'warn',
        detail: expect.stringMatching(/^rate_limit since /),
      }),
    ]);
    expect(chatRequests(s)).toBe(probes);
    expect(sc.calls('primary')).toHaveLength(3);

    const status = await guardian(['status', '-c', config]);
    expect(status.code).toBe(2);
    expect(status.stdout).toMatch(/^mode: primary \(inference-primary\)\nstate: ALERTING since .* \(rate_limit\): /);
    expect(status.stdout).toContain('restarts in the last 300 s: 3\n');
    const json = await guardian(['status', '--json', '-c', config]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      mode: 'primary',
      agent: 'inference-primary',
      alerting: { reason: 'rate_limit' },
      restarts: [expect.any(Number), expect.any(Number), expect.any(Number)],
      causes: { http_error: expect.any(Number) },
      lock: null,
    });

    // The operator fixes it and resets: the guardian probes again.
    const reset = await guardian(['reset', '-c', config]);
    expect(reset).toMatchObject({ code: 0, stdout: 'reset: cleared rate_limit\n' });
    s.setMode('ok');
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    const tail = sc.lines().slice(-2);
    expect(tail).toEqual([
      expect.objectContaining({ event: 'reset', level: 'info', detail: expect.stringContaining('cleared rate_limit') }),
      expect.objectContaining({ event: 'probe_ok' }),
    ]);
    expect((await guardian(['status', '-c', config])).stdout).toContain('state: serving\n');
  });

  it('opens the circuit breaker after 4 distinct root causes: an event says why, exit 2', async () => {
    const sc = fx.scenario('circuit');
    const s = await sc.fault();
    const config = sc.config(s.port, { probeBudgetS: 0.3, failuresBeforeRestart: 10 });
    const t0 = nowS();
    const codes: number[] = [];
    for (const mode of ['hang', '500', '500', 'empty', 'reset']) {
      s.setMode(mode);
      codes.push((await guardian(['tick', '-c', config])).code);
    }
    expect(codes).toEqual([0, 0, 0, 0, 2]);
    const events = sc.events(t0);
    expect(events.map((e) => e.event)).toEqual([
      'probe_fail',
      'probe_fail',
      'probe_fail',
      'probe_fail',
      'probe_fail',
      'circuit_open',
    ]);
    expect(events.at(-1)).toMatchObject({
      level: 'error',
      detail: '4 distinct root causes within 3600 s (empty_reply, http_error, reset, timeout): remediation halted',
    });
    const after = await guardian(['tick', '-c', config]);
    expect(after.code).toBe(2);
    expect(after.stderr).toContain('(circuit_open: 4 distinct root causes');
  });
});

describe('busy deferral', () => {
  it('skips the probe after a success in the primary access log within the window', async () => {
    const sc = fx.scenario('busy-primary');
    const s = await sc.fault();
    const access = join(sc.dir, 'inference-access.log');
    appendFileSync(
      access,
      `${JSON.stringify({ ts: nowS() - 5, level: 'info', msg: 'request completed', status: 200 })}\n`,
    );
    const config = sc.config(s.port, { primary: { accessLog: access } });
    const t0 = nowS();
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    const [e] = sc.events(t0);
    expect(e).toMatchObject({ event: 'probe_skip_busy', level: 'info' });
    expect(e!.recent_success_age_s).toBeGreaterThanOrEqual(5);
    expect(e!.recent_success_age_s).toBeLessThan(60);
    // Only the quick check of what the server reports (its /health; this one reports no
    // progress, so the spec's rule holds): no completion.
    expect(s.received()).toEqual([{ method: 'GET', path: '/health', body: '' }]);
  });

  it('skips it after a "POST /v1/chat/completions HTTP/1.1" 200 in the fallback access log, but not after a 500', async () => {
    const sc = fx.scenario('busy-fallback');
    const s = await sc.fault();
    // The fallback backend (Python) is another server; its access log is what it would write.
    const access = join(sc.dir, 'fallback-access.log');
    const stamp = (d: Date) =>
      `${String(d.getDate()).padStart(2, '0')}/${d.toLocaleString('en-US', { month: 'short' })}/${d.getFullYear()} ${d.toTimeString().slice(0, 8)}`;
    appendFileSync(access, `127.0.0.1 - - [${stamp(new Date())}] "POST /v1/chat/completions HTTP/1.1" 500 -\n`);
    const config = sc.config(s.port, {
      fallback: { http: '127.0.0.1:9', service: { kind: 'command', start: [NODE, '-e', ''] }, accessLog: access },
    });
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok']);
    appendFileSync(access, `127.0.0.1 - - [${stamp(new Date())}] "POST /v1/chat/completions HTTP/1.1" 200 -\n`);
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok', 'probe_skip_busy']);
    expect(chatRequests(s)).toBe(1);
  });

  it('does not take its own probe in the access log for a client: tick after tick it probes', async () => {
    const sc = fx.scenario('own');
    const access = join(sc.dir, 'access.log');
    const s = await sc.fault('fault', ['--access-log', access]);
    const config = sc.config(s.port, { primary: { accessLog: access } });
    for (let i = 0; i < 3; i++) expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok', 'probe_ok', 'probe_ok']);
    expect(readLines(access).filter((l) => l.msg === 'request completed')).toHaveLength(3);
    // …while a client's completion in between does defer the next probe.
    appendFileSync(access, `${JSON.stringify({ ts: nowS(), msg: 'request completed' })}\n`);
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'probe_skip_busy' });
  });
});

describe('durability', () => {
  it('keeps its state and log whole through kill -9 at any point, and the next guardian takes over at once', async () => {
    const sc = fx.scenario('kill9');
    const s = await sc.fault();
    s.setMode('500');
    const config = sc.config(s.port, {
      intervalS: 0,
      failuresBeforeRestart: 1,
      maxRestarts: 100000,
      circuitBreakerCauses: 100,
      primary: { service: { kind: 'command', restart: [NODE, '-e', ''] } },
    });
    let restarts = 0;
    for (let round = 0; round < 8; round++) {
      const g = spawnGuardian(['run', '-c', config]);
      await waitFor('a tick', () => existsSync(join(sc.dir, 'state.json')));
      await sleep(60 + ((round * 37) % 200));
      g.kill('SIGKILL');
      await exited(g);
      const state = JSON.parse(readFileSync(join(sc.dir, 'state.json'), 'utf8'));
      expect(state.version).toBe(1);
      expect(state.machine.restarts.length).toBeGreaterThanOrEqual(restarts);
      restarts = state.machine.restarts.length;
      // Every line of the log is whole JSON (readLines parses each).
      expect(sc.lines().length).toBeGreaterThan(0);
    }
    expect(restarts).toBeGreaterThan(0);
    s.setMode('ok');
    const r = await guardian(['tick', '-c', config], {}, 10_000);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(sc.lines().at(-1)).toMatchObject({ event: 'probe_ok' });
    expect(existsSync(join(sc.dir, 'state.json.lock'))).toBe(false);
  });

  it('refuses a state file of a newer guardian with a clear message and exit 2', async () => {
    const sc = fx.scenario('badstate');
    const s = await sc.fault();
    const config = sc.config(s.port);
    writeJson(join(sc.dir, 'state.json'), { version: 2, machine: {} });
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `guardian: state file ${join(sc.dir, 'state.json')} was written by a newer guardian (version 2); fix it, or remove it to start afresh (its alerting state is then lost)\n`,
    );
    expect(s.received()).toEqual([]);
  });
});

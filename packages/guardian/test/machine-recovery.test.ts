/**
 * The machine's recovery decisions (issues 18 and 19): busy deferral only for a server that
 * answers its model list, the start-up grace after the guardian's own starts and restarts, a
 * fallback swap as one root cause, `fallback_activated` only once the fallback serves, and an
 * activation interrupted by a kill finished by the next run. Table-driven where it is a table.
 */
import { describe, expect, it } from '@jest/globals';
import {
  type BusyAnswer,
  busyDecision,
  INITIAL_STATE,
  isLoading,
  type MachineConfig,
  type MachineState,
  type Observation,
  type RootCause,
} from '../src/machine.js';
import {
  CHAT_ONLY,
  drive as driveWith,
  names,
  type ProbeAnswer,
  probes,
  T0,
  tick,
  type World,
} from './machine-driver.js';

/** The chat probe alone, no binary to check. */
const C: MachineConfig = { ...CHAT_ONLY, integrity: false };
const drive = (state: MachineState, first: Observation, now: number, world: World = {}) =>
  driveWith(state, first, now, world, C);

describe('busy deferral (issues 18.1, 30): the pure decision', () => {
  const rows: [string, number | null, BusyAnswer | null, 'check' | 'skip' | 'probe'][] = [
    ['no success logged', null, null, 'probe'],
    ['no success logged, even with work progressing', null, 'progressing', 'probe'],
    ['a success 30 s ago, not checked yet', T0 - 30, null, 'check'],
    ['a success 30 s ago, work in flight and progressing', T0 - 30, 'progressing', 'skip'],
    ['a success 30 s ago, a slot with no progress past its bound (spec 3.4 hang)', T0 - 30, 'stalled', 'probe'],
    ['a success 30 s ago, nothing in flight (idle: a probe costs nothing)', T0 - 30, 'idle', 'probe'],
    ['a success 30 s ago, /health 503 for another reason (loading)', T0 - 30, 'not_serving', 'probe'],
    ['a success 30 s ago, it answered but reports no progress (the spec rule)', T0 - 30, 'unreported', 'skip'],
    ['a success 30 s ago, connection refused (crashed)', T0 - 30, 'no_answer', 'probe'],
    ['a success 5 s ago, no answer within busyCheckS (SIGSTOPped)', T0 - 5, 'no_answer', 'probe'],
    ['a success 90 s ago: outside the window', T0 - 90, null, 'probe'],
    ['a success 90 s ago, even if progressing', T0 - 90, 'progressing', 'probe'],
    ['a success 89.9 s ago, progressing', T0 - 89.9, 'progressing', 'skip'],
  ];
  it.each(rows)('%s', (_what, at, answered, expected) => {
    expect(busyDecision(at, T0, 90, answered)).toBe(expected);
  });
});

describe('busy deferral (issue 18.1): the machine', () => {
  const S = { ...INITIAL_STATE, lastOkAt: T0 - 17 };
  const rows: [string, ProbeAnswer, string[], string[], number][] = [
    [
      'the server answers, no progress report → probe_skip_busy, no chat probe',
      { ok: true },
      ['busy@primary'],
      ['probe_skip_busy'],
      0,
    ],
    [
      'work in flight, progressing → probe_skip_busy, no chat probe',
      { ok: true, busy: 'progressing' },
      ['busy@primary'],
      ['probe_skip_busy'],
      0,
    ],

    [
      'connection refused → not busy: the chat probe runs and counts',
      { ok: false, cause: 'refused', snippet: 'ECONNREFUSED' },
      ['busy@primary', 'chat@primary'],
      ['probe_fail'],
      1,
    ],
    [
      'no answer within busyCheckS → not busy: the chat probe runs and counts',
      { ok: false, cause: 'timeout', snippet: 'no reply' },
      ['busy@primary', 'chat@primary'],
      ['probe_fail'],
      1,
    ],
  ];
  it.each(rows)('%s', (_what, answer, expProbes, expEvents, consecutive) => {
    const r = drive(S, tick({ lastSuccessAt: T0 - 17 }), T0, { probe: () => answer });
    expect(probes(r)).toEqual(expProbes);
    expect(names(r)).toEqual(expEvents);
    expect(r.state.consecutive).toBe(consecutive);
  });

  it.each(['stalled', 'idle', 'not_serving'] as const)(
    'the server reports %s → not busy: the chat probe runs (a hung one fails and counts)',
    (busy) => {
      const r = drive(S, tick({ lastSuccessAt: T0 - 17 }), T0, {
        probe: (a) => (a.probe === 'busy' ? { ok: true, busy } : { ok: false, cause: 'timeout', snippet: 'no reply' }),
      });
      expect(probes(r)).toEqual(['busy@primary', 'chat@primary']);
      expect(names(r)).toEqual(['probe_fail']);
      expect(r.state.consecutive).toBe(1);
    },
  );

  it('a second not-busy tick restarts (the spec row "second consecutive failure")', () => {
    const refused = { ok: false, cause: 'refused' as const, snippet: 'ECONNREFUSED' };
    const one = drive(S, tick({ lastSuccessAt: T0 - 17 }), T0, { probe: () => refused });
    const two = drive(one.state, tick({ lastSuccessAt: T0 - 17 }), T0 + 10, { probe: () => refused });
    expect(names(two)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
  });
});

describe('start-up grace (issue 19.3)', () => {
  const rows: [string, number | null, RootCause | undefined, boolean][] = [
    ['refused within the grace', T0 + 60, 'refused', true],
    ['503 model_loading within the grace', T0 + 60, 'loading', true],
    ['a timeout within the grace is a failure', T0 + 60, 'timeout', false],
    ['an HTTP 500 within the grace is a failure', T0 + 60, 'http_error', false],
    ['refused after the grace ran out', T0, 'refused', false],
    ['refused with no grace', null, 'refused', false],
  ];
  it.each(rows)('%s', (_what, until, cause, loading) => {
    expect(isLoading(until, T0, cause)).toBe(loading);
  });

  it('a restart gives the restarted server its grace: refused and model_loading are "loading", not failures', () => {
    const failing = { ...INITIAL_STATE, consecutive: 1, lastFailureAt: T0 - 10 };
    const restart = drive(failing, tick(), T0, { probe: () => ({ ok: false, cause: 'timeout' }) });
    expect(names(restart)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
    expect(restart.state.graceUntil).toBe(T0 + 120);
    const early = drive(restart.state, tick(), T0 + 0.03, { probe: () => ({ ok: false, cause: 'refused' }) });
    expect(names(early)).toEqual(['probe_loading']);
    expect(early.state.consecutive).toBe(0);
    expect(early.state.causes).toEqual({ timeout: T0 });
    // A model that loads for longer than one interval: no restart loop, whatever the interval.
    let s = early.state;
    for (let t = 10; t < 120; t += 10) {
      const r = drive(s, tick(), T0 + t, {
        probe: () => ({ ok: false, cause: 'loading', snippet: 'HTTP 503: model_loading' }),
      });
      expect(names(r)).toEqual(['probe_loading']);
      s = r.state;
    }
    const ok = drive(s, tick(), T0 + 125, { probe: () => ({ ok: true }) });
    expect(names(ok)).toEqual(['probe_ok']);
    expect(ok.state.graceUntil).toBeNull();
  });

  it('the grace is bounded: once it runs out, a server still loading fails, and is restarted', () => {
    const s = { ...INITIAL_STATE, graceUntil: T0 + 120 };
    const loading = () => ({ ok: false, cause: 'loading' as const, snippet: 'HTTP 503: model_loading' });
    const one = drive(s, tick(), T0 + 121, { probe: loading });
    expect(names(one)).toEqual(['probe_fail']);
    const two = drive(one.state, tick(), T0 + 131, { probe: loading });
    expect(names(two)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
  });

  it('a restore gives the restored primary its grace', () => {
    const r = drive(
      { ...INITIAL_STATE, mode: 'fallback' },
      { type: 'restore', verified: true, detail: '', lock: true },
      T0,
    );
    expect(names(r)).toEqual(['restored']);
    expect(r.state.graceUntil).toBe(T0 + 120);
    const next = drive(r.state, tick(), T0 + 1.6, { probe: () => ({ ok: false, cause: 'refused' }) });
    expect(names(next)).toEqual(['probe_loading']);
    expect(next.state.restarts).toEqual([]);
  });
});

describe('a model waiting for CPUs other processes hold', () => {
  it('a timed-out probe the server explains so is not counted, however many; one it does not explain is', () => {
    const waiting = () => ({ ok: false, cause: 'timeout' as const, snippet: 'no complete reply', waitingCpu: true });
    let s: MachineState = { ...INITIAL_STATE, consecutive: 1, lastFailureAt: T0 - 10 };
    for (let t = 0; t < 100; t += 10) {
      const r = drive(s, tick(), T0 + t, { probe: waiting });
      expect(names(r)).toEqual(['probe_waiting_cpu']);
      expect(r.events[0]).toMatchObject({ probe_ms: expect.any(Number), agent: expect.any(String) });
      expect(r.state.consecutive).toBe(1);
      expect(r.state.restarts).toEqual([]);
      expect(r.state.causes).toEqual({});
      s = r.state;
    }
    const hung = drive(s, tick(), T0 + 100, { probe: () => ({ ok: false, cause: 'timeout' }) });
    expect(names(hung)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
  });
});

describe('fallback (issues 19.2, 19.9)', () => {
  const fatal = { pattern: 'Segmentation fault', line: 'Segmentation fault (core dumped)' };

  it('is one root cause: the failures that led to it do not open the circuit', () => {
    const causes = { timeout: T0 - 600, refused: T0 - 300, http_error: T0 - 100 };
    const r = drive({ ...INITIAL_STATE, causes }, tick({ fatal }), T0);
    expect(names(r)).toEqual(['fallback_activated']);
    expect(r.exit).toBeNull();
    expect(r.state.causes).toEqual({ 'fatal:Segmentation fault': T0 });
    // The next tick probes the fallback, still loading: "loading", not a failure.
    const next = drive(r.state, tick({ lock: true }), T0 + 1, {
      probe: () => ({ ok: false, cause: 'loading', snippet: 'HTTP 503: model_loading' }),
    });
    expect(r.state.graceUntil).toBeNull();
    expect(names(next)).toEqual(['probe_fail']);
    expect(next.exit).toBeNull();
  });

  it('is activated only once the fallback serves', () => {
    const r = drive(INITIAL_STATE, tick({ fatal }), T0);
    const types = r.actions.map((a) => (a.type === 'service' ? `${a.op} ${a.target}` : a.type));
    expect(types).toEqual(['write_lock', 'stop primary', 'start fallback', 'await_serving', 'alert']);
    expect(r.state.activating).toBeNull();
  });

  it('a fallback that does not serve: fallback_failed at error level, an alert, exit 2', () => {
    const r = drive(INITIAL_STATE, tick({ fatal }), T0, { serving: false });
    expect(names(r)).toEqual(['fallback_failed']);
    expect(r.events[0]).toMatchObject({ level: 'error', detail: expect.stringContaining('no completion') });
    expect(r.exit).toBe(2);
    expect(r.state.alerting?.reason).toBe('fallback_failed');
    expect(r.actions.at(-1)).toMatchObject({ type: 'alert', message: expect.stringContaining('fallback failed') });
  });

  it('a fallback whose start command fails: fallback_failed without waiting', () => {
    const r = drive(INITIAL_STATE, tick({ fatal }), T0, { rc: (a) => (a.op === 'start' ? 1 : 0) });
    expect(names(r)).toEqual(['service_failed', 'fallback_failed']);
    expect(r.actions.some((a) => a.type === 'await_serving')).toBe(false);
    expect(r.exit).toBe(2);
  });

  it('an activation interrupted by a kill is finished, and said, by the next run', () => {
    // Killed after the lock was written and the primary stopped, before the fallback started.
    const killed = drive(INITIAL_STATE, tick({ fatal }), T0, { killAfter: 1 });
    expect(killed.state.activating).toMatchObject({ pattern: 'Segmentation fault', since: T0, resumed: 0 });
    expect(names(killed)).toEqual([]);
    const next = drive(killed.state, tick({ lock: true }), T0 + 60);
    const types = next.actions.map((a) => (a.type === 'service' ? `${a.op} ${a.target}` : a.type));
    expect(types).toEqual(['write_lock', 'stop primary', 'start fallback', 'await_serving', 'alert']);
    expect(names(next)).toEqual(['fallback_activated']);
    expect(next.actions.at(-1)).toMatchObject({ message: expect.stringContaining('interrupted') });
    expect(next.state.activating).toBeNull();
    // The fatal cause is not counted twice.
    expect(next.state.causes).toEqual({ 'fatal:Segmentation fault': T0 });
  });
});

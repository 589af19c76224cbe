/**
 * The pure state machine, row by row of spec 3.1 and limit by limit of spec 8 (DESIGN.md 5),
 * driven the way the shell drives it: an observation, a decision, the actions answered by a
 * scripted world, until nothing is left to do.
 */
import { describe, expect, it } from '@jest/globals';
import { FATAL_PATTERNS, GUARDIAN_EVENT_FIELDS, GUARDIAN_EXTRA_EVENT_FIELDS } from '@vigil/shared-types';
import fc from 'fast-check';
import {
  type Action,
  type Decision,
  decide,
  type GuardianEvent,
  INITIAL_STATE,
  type MachineConfig,
  type MachineState,
  OBSERVING_ACTIONS,
  type Observation,
  type RootCause,
} from '../src/machine.js';

const C: MachineConfig = {
  busyWindowS: 90,
  failuresBeforeRestart: 2,
  maxRestarts: 3,
  restartWindowS: 300,
  modelListIntervalS: 60,
  canaryIntervalS: 600,
  integrityIntervalS: 300,
  circuitBreakerCauses: 4,
  circuitWindowS: 3600,
  startGraceS: 120,
  agents: { primary: 'inference-primary', fallback: 'inference-fallback' },
  integrity: true,
};
/** Only the chat probe is due (the other cadences were just served). */
const T0 = 1_000_000;
const S0: MachineState = { ...INITIAL_STATE, lastModelListAt: T0, lastCanaryAt: T0, lastIntegrityAt: T0 };
/** The same with the model list, canary and integrity cadences off (for runs over many ticks). */
const CHAT_ONLY: MachineConfig = { ...C, modelListIntervalS: 0, canaryIntervalS: 0, integrityIntervalS: 0 };

const FIELDS: Record<string, readonly string[]> = { ...GUARDIAN_EVENT_FIELDS, ...GUARDIAN_EXTRA_EVENT_FIELDS };

interface World {
  /** Answers probes; default: every probe succeeds in 40 ms. */
  probe?: (a: Extract<Action, { type: 'probe' }>) => Omit<Extract<Observation, { type: 'probe' }>, 'type' | 'probe'>;
  /** Exit status of service commands (default 0). */
  rc?: (a: Extract<Action, { type: 'service' }>) => number;
  integrity?: Extract<Observation, { type: 'integrity' }>['result'];
  /** Whether a backend waited for after its start serves (default true). */
  serving?: boolean;
}

interface Run {
  state: MachineState;
  events: GuardianEvent[];
  actions: Action[];
  exit: number | null;
}

/** Drives the machine as the shell does, checking on every decision the contract of actions and events. */
function drive(state: MachineState, first: Observation, now: number, world: World = {}, c = C): Run {
  const all: Run = { state, events: [], actions: [], exit: null };
  let obs: Observation | null = first;
  for (let guard = 0; obs !== null; guard++) {
    if (guard > 50) throw new Error('the machine does not settle');
    const d: Decision = decide(all.state, obs, c, now);
    checkDecision(d);
    all.state = d.state;
    all.events.push(...d.events);
    all.actions.push(...d.actions);
    obs = null;
    for (const a of d.actions) {
      if (a.type === 'probe') {
        obs = { type: 'probe', probe: a.probe, ...(world.probe ? world.probe(a) : { ok: true, ms: 40 }) };
      } else if (a.type === 'service') {
        obs = { type: 'service', op: a.op, target: a.target, purpose: a.purpose, rc: world.rc?.(a) ?? 0, detail: '' };
      } else if (a.type === 'integrity') {
        obs = { type: 'integrity', result: world.integrity ?? 'ok', detail: 'checked' };
      } else if (a.type === 'await_serving') {
        const ok = world.serving ?? true;
        obs = { type: 'serving', target: a.target, ok, ms: 500, detail: ok ? 'served after 0.5 s' : 'no completion' };
      }
    }
    if (d.exit !== null) {
      all.exit = d.exit;
      break;
    }
  }
  return all;
}

function checkDecision(d: Decision): void {
  // At most one action yields an observation, and it comes last.
  const observing = d.actions.map((a) => OBSERVING_ACTIONS.has(a.type));
  expect(observing.filter(Boolean).length).toBeLessThanOrEqual(1);
  if (observing.includes(true)) expect(observing.at(-1)).toBe(true);
  if (d.exit !== null) expect(observing.includes(true)).toBe(false);
  for (const e of d.events) {
    // Exactly the fields of spec 2.5 for each event (and the documented ones for the others).
    const { event, level, ...fields } = e;
    expect(Object.keys(fields).sort()).toEqual([...(FIELDS[event] ?? ['?'])].sort());
    expect(['info', 'warn', 'error']).toContain(level);
  }
}

const tick = (over: Partial<Extract<Observation, { type: 'tick' }>> = {}): Observation => ({
  type: 'tick',
  lock: false,
  fatal: null,
  lastSuccessAt: null,
  ...over,
});
const fail =
  (cause: RootCause, ms = 120, snippet = 'boom') =>
  () => ({ ok: false, ms, cause, snippet });
const names = (r: Run) => r.events.map((e) => e.event);
const services = (r: Run) =>
  r.actions.filter((a) => a.type === 'service').map((a) => (a.type === 'service' ? `${a.op} ${a.target}` : ''));
const probes = (r: Run) =>
  r.actions.filter((a) => a.type === 'probe').map((a) => (a.type === 'probe' ? `${a.probe}@${a.target}` : ''));

describe('spec 3.1, row by row', () => {
  const rows: {
    row: string;
    state: Partial<MachineState>;
    obs: Observation;
    world?: World;
    events: string[];
    services?: string[];
    probes?: string[];
    exit?: number | null;
    after?: Partial<MachineState>;
  }[] = [
    {
      row: 'serving, probe returns real inference within 20 s → serving, probe_ok',
      state: {},
      obs: tick(),
      events: ['probe_ok'],
      probes: ['chat@primary'],
      after: { consecutive: 0, mode: 'primary' },
    },
    {
      row: 'serving, success logged by either backend within 90 s, the model list answers → serving, probe_skip_busy, no probe',
      state: {},
      obs: tick({ lastSuccessAt: T0 - 30 }),
      events: ['probe_skip_busy'],
      probes: ['busy@primary'],
      after: { consecutive: 0 },
    },
    {
      row: 'failing and busy (the model list answers) → no escalation: the failure count stays, no probe, no restart',
      state: { consecutive: 1, lastFailureAt: T0 - 60 },
      obs: tick({ lastSuccessAt: T0 - 10 }),
      events: ['probe_skip_busy'],
      probes: ['busy@primary'],
      services: [],
      after: { consecutive: 1 },
    },
    {
      row: 'serving, probe fails → failing (consecutive = 1), probe_fail',
      state: {},
      obs: tick(),
      world: { probe: fail('http_error') },
      events: ['probe_fail'],
      services: [],
      after: { consecutive: 1, lastFailureAt: T0 },
    },
    {
      row: 'serving, probe exceeds the 20 s budget → failing, probe_fail',
      state: {},
      obs: tick(),
      world: { probe: fail('timeout', 20_000, 'no complete reply within the 20 s budget') },
      events: ['probe_fail'],
      after: { consecutive: 1 },
    },
    {
      row: 'failing, second consecutive failure → restarting (kickstart), forced restart, restart_requested',
      state: { consecutive: 1, lastFailureAt: T0 - 60 },
      obs: tick(),
      world: { probe: fail('timeout') },
      events: ['probe_fail', 'restarting', 'restart_requested'],
      services: ['restart primary'],
      after: { consecutive: 0, restarts: [T0] },
    },
    {
      row: 'failing, probe succeeds → serving, counter reset',
      state: { consecutive: 1, lastFailureAt: T0 - 60 },
      obs: tick(),
      events: ['probe_ok'],
      after: { consecutive: 0, lastFailureAt: null, lastOkAt: T0 },
    },
    {
      row: 'restart requested, a 4th restart within 300 s → alerting, rate_limit, exit 2',
      state: { consecutive: 1, lastFailureAt: T0 - 60, restarts: [T0 - 250, T0 - 150, T0 - 60] },
      obs: tick(),
      world: { probe: fail('refused') },
      events: ['probe_fail', 'rate_limit'],
      services: [],
      exit: 2,
    },
    {
      row: 'serving, fatal pattern in the recent primary log → lock written, primary stopped, fallback started, fallback_activated',
      state: {},
      obs: tick({ fatal: { pattern: 'Segmentation fault', line: 'Segmentation fault (core dumped)' } }),
      events: ['fallback_activated'],
      services: ['stop primary', 'start fallback'],
      probes: [],
      after: { mode: 'fallback', consecutive: 0, restarts: [] },
    },
    {
      row: 'failing at the rate limit with a fatal pattern → the fatal pattern wins (checked before the rate limit)',
      state: { consecutive: 1, lastFailureAt: T0 - 60, restarts: [T0 - 250, T0 - 150, T0 - 60] },
      obs: tick({ fatal: { pattern: 'address already in use', line: 'listen EADDRINUSE: address already in use' } }),
      world: { probe: fail('refused') },
      events: ['fallback_activated'],
      services: ['stop primary', 'start fallback'],
      exit: null,
    },
    {
      row: 'fallback active, lock present → probes target the fallback',
      state: { mode: 'fallback' },
      obs: tick({ lock: true }),
      events: ['probe_ok'],
      probes: ['chat@fallback'],
      after: { mode: 'fallback' },
    },
    {
      row: 'fallback active with a fatal pattern in the primary log → never a fallback from the fallback',
      state: { mode: 'fallback' },
      obs: tick({ lock: true, fatal: { pattern: 'Out of memory', line: 'Out of memory' } }),
      events: ['probe_ok'],
      services: [],
      probes: ['chat@fallback'],
    },
    {
      row: 'fallback active, second failure → the fallback is the one restarted',
      state: { mode: 'fallback', consecutive: 1, lastFailureAt: T0 - 60 },
      obs: tick({ lock: true }),
      world: { probe: fail('empty_reply') },
      events: ['probe_fail', 'restarting', 'restart_requested'],
      services: ['restart fallback'],
    },
    {
      row: 'fallback active, operator swaps back, primary verified standalone → fallback stopped, lock removed, primary started and restarted',
      state: { mode: 'fallback', restarts: [T0 - 10], consecutive: 1 },
      obs: { type: 'restore', verified: true, detail: 'ok', lock: true },
      events: ['restored'],
      services: ['stop fallback', 'start primary', 'restart primary'],
      exit: 0,
      after: { mode: 'primary', consecutive: 0, restarts: [], alerting: null },
    },
    {
      row: 'fallback active, swap-back with a primary that does not run standalone → refused, exit 2, nothing touched',
      state: { mode: 'fallback' },
      obs: { type: 'restore', verified: false, detail: 'inference-server --version exited with 1', lock: true },
      events: ['restore_refused'],
      services: [],
      exit: 2,
      after: { mode: 'fallback' },
    },
  ];

  it.each(rows)('$row', ({ state, obs, world, events, services: svc, probes: pr, exit, after }) => {
    const r = drive({ ...S0, ...state }, obs, T0, world);
    expect(names(r)).toEqual(events);
    if (svc) expect(services(r)).toEqual(svc);
    if (pr) expect(probes(r)).toEqual(pr);
    expect(r.exit).toBe(exit === undefined ? null : exit);
    if (after) expect(r.state).toMatchObject(after);
  });

  it('gives each spec event its fields and level', () => {
    const ok = drive(S0, tick(), T0, { probe: () => ({ ok: true, ms: 41.6 }) });
    expect(ok.events).toEqual([{ event: 'probe_ok', level: 'info', probe_ms: 42, agent: 'inference-primary' }]);
    const busy = drive(S0, tick({ lastSuccessAt: T0 - 12.3456 }), T0);
    expect(busy.events).toEqual([{ event: 'probe_skip_busy', level: 'info', recent_success_age_s: 12.346 }]);
    const failing = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 60 }, tick(), T0, {
      probe: fail('http_error', 12, 'HTTP 500: model crashed'),
      rc: () => 3,
    });
    expect(failing.events).toEqual([
      { event: 'probe_fail', level: 'warn', probe_ms: 12, consecutive: 2, snippet: 'HTTP 500: model crashed' },
      { event: 'restarting', level: 'warn', action: 'kickstart', agent: 'inference-primary' },
      { event: 'restart_requested', level: 'info', rc: 3 },
    ]);
    const limited = drive(
      { ...S0, consecutive: 1, lastFailureAt: T0 - 1, restarts: [T0 - 3, T0 - 2, T0 - 1] },
      tick(),
      T0,
      { probe: fail('timeout') },
    );
    expect(limited.events.at(-1)).toEqual({ event: 'rate_limit', level: 'warn' });
    const fb = drive(S0, tick({ fatal: { pattern: 'library not found', line: 'dyld: library not found' } }), T0);
    expect(fb.events).toEqual([{ event: 'fallback_activated', level: 'warn' }]);
    const missing = drive({ ...S0, lastIntegrityAt: null }, tick(), T0, { integrity: 'missing' });
    expect(missing.events[0]).toEqual({ event: 'binary_missing', level: 'error' });
  });
});

describe('the restart that follows', () => {
  it('writes the lock file with what, when and the matching line before it stops the primary', () => {
    const line = 'ggml_metal_init: error: Failed to load the default metallib';
    const r = drive(S0, tick({ fatal: { pattern: 'Failed to load the default metallib', line } }), T0);
    expect(r.actions.map((a) => a.type)).toEqual(['write_lock', 'service', 'service', 'await_serving', 'alert']);
    expect(r.actions[0]).toEqual({
      type: 'write_lock',
      lock: {
        what: expect.stringContaining('Failed to load the default metallib'),
        since: T0,
        pattern: 'Failed to load the default metallib',
        line,
        primary: 'inference-primary',
        fallback: 'inference-fallback',
      },
    });
  });

  it.each(FATAL_PATTERNS)('falls back on "%s"', (pattern) => {
    const r = drive(S0, tick({ fatal: { pattern, line: `x ${pattern} y` } }), T0);
    expect(names(r)).toEqual(['fallback_activated']);
    expect(r.state.causes).toEqual({ [`fatal:${pattern}`]: T0 });
  });

  it('reports service commands that fail while activating the fallback, and still activates it', () => {
    const r = drive(S0, tick({ fatal: { pattern: 'Segmentation fault', line: 'Segmentation fault' } }), T0, {
      rc: (a) => (a.op === 'stop' ? 124 : 0),
    });
    expect(names(r)).toEqual(['service_failed', 'fallback_activated']);
    expect(r.events[0]).toEqual({
      event: 'service_failed',
      level: 'warn',
      action: 'stop',
      agent: 'inference-primary',
      rc: 124,
      detail: '',
    });
    expect(r.state.mode).toBe('fallback');
  });

  it('needs a fallback: without one a fatal pattern asks for a person (exit 2)', () => {
    const c = { ...C, agents: { primary: 'p', fallback: null } };
    const r = drive(S0, tick({ fatal: { pattern: 'Out of memory', line: 'Out of memory' } }), T0, {}, c);
    expect(names(r)).toEqual(['fallback_unavailable']);
    expect(r.exit).toBe(2);
    expect(r.state.alerting?.reason).toBe('fallback_unavailable');
    expect(r.actions.map((a) => a.type)).toEqual(['alert']);
  });

  it('counts a failed restart command as a root cause', () => {
    const r = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 5 }, tick(), T0, {
      probe: fail('timeout'),
      rc: () => 1,
    });
    expect(r.events.at(-1)).toEqual({ event: 'restart_requested', level: 'info', rc: 1 });
    expect(Object.keys(r.state.causes).sort()).toEqual(['restart_failed', 'timeout']);
  });

  it('restores without a lock file too (after a rate limit): no fallback to stop, the alerting state cleared', () => {
    const alerting = { reason: 'rate_limit' as const, since: T0 - 100, detail: 'x', announced: true };
    const r = drive(
      { ...S0, alerting, restarts: [T0 - 50] },
      { type: 'restore', verified: true, detail: '', lock: false },
      T0,
    );
    expect(services(r)).toEqual(['start primary', 'restart primary']);
    expect(r.actions.map((a) => a.type)).toEqual(['skip_primary_log', 'service', 'service']);
    expect(r.state.alerting).toBeNull();
    expect(r.exit).toBe(0);
  });

  it('exits 1 from a restore whose service commands failed, and says which', () => {
    const r = drive({ ...S0, mode: 'fallback' }, { type: 'restore', verified: true, detail: '', lock: true }, T0, {
      rc: (a) => (a.op === 'start' ? 5 : 0),
    });
    expect(names(r)).toEqual(['service_failed', 'restored']);
    expect(r.exit).toBe(1);
  });
});

describe('spec 8 limits', () => {
  it('restarts at most 3 times per 300 s: the 4th attempt is rate-limited, one just outside the window is not', () => {
    const three = [T0 - 299, T0 - 200, T0 - 100];
    const inside = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 60, restarts: three }, tick(), T0, {
      probe: fail('timeout'),
    });
    expect(names(inside)).toEqual(['probe_fail', 'rate_limit']);
    const outside = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 60, restarts: three }, tick(), T0 + 1, {
      probe: fail('timeout'),
    });
    expect(names(outside)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
    expect(outside.state.restarts).toEqual([T0 - 200, T0 - 100, T0 + 1]);
  });

  it('walks a restart storm from serving to alerting: restarts on every second failure, the 4th restart is refused', () => {
    let state = S0;
    const seen: string[] = [];
    let exit: number | null = null;
    for (let i = 0; i < 12 && exit === null; i++) {
      const r = drive(state, tick(), T0 + i * 20, { probe: fail('timeout') }, CHAT_ONLY);
      state = r.state;
      seen.push(...names(r).filter((n) => n !== 'probe_fail'));
      exit = r.exit;
    }
    expect(seen).toEqual([
      'restarting',
      'restart_requested',
      'restarting',
      'restart_requested',
      'restarting',
      'restart_requested',
      'rate_limit',
    ]);
    expect(exit).toBe(2);
    expect(state.alerting).toMatchObject({ reason: 'rate_limit', announced: false });
  });

  it('keeps the alerting state: every later tick exits 2, says so once, and touches nothing', () => {
    const alerting = { reason: 'rate_limit' as const, since: T0 - 10, detail: '3 restarts', announced: false };
    const first = drive({ ...S0, alerting }, tick(), T0);
    expect(first.events).toEqual([
      { event: 'alerting', level: 'warn', detail: expect.stringContaining('rate_limit since') },
    ]);
    expect(first.exit).toBe(2);
    expect(first.actions).toEqual([]);
    const again = drive(first.state, tick({ fatal: { pattern: 'Out of memory', line: 'x' } }), T0 + 60);
    expect(again.events).toEqual([]);
    expect(again.actions).toEqual([]);
    expect(again.exit).toBe(2);
  });

  it('needs 2 consecutive failures within the window: a failure older than 300 s starts the count again', () => {
    const stale = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 300 }, tick(), T0, { probe: fail('timeout') });
    expect(names(stale)).toEqual(['probe_fail']);
    expect(stale.events[0]).toMatchObject({ consecutive: 1 });
    const fresh = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 299 }, tick(), T0, { probe: fail('timeout') });
    expect(names(fresh)).toContain('restarting');
  });

  it('takes failuresBeforeRestart from the configuration', () => {
    const c = { ...C, failuresBeforeRestart: 3 };
    const two = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 5 }, tick(), T0, { probe: fail('timeout') }, c);
    expect(names(two)).toEqual(['probe_fail']);
    const three = drive(two.state, tick(), T0 + 5, { probe: fail('timeout') }, c);
    expect(names(three)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
  });

  it('defers for 90 s after a logged success: 89.9 s ago skips, 90 s ago probes', () => {
    expect(names(drive(S0, tick({ lastSuccessAt: T0 - 89.9 }), T0))).toEqual(['probe_skip_busy']);
    expect(names(drive(S0, tick({ lastSuccessAt: T0 - 90 }), T0))).toEqual(['probe_ok']);
    // A clock step backwards does not give a negative age.
    expect(drive(S0, tick({ lastSuccessAt: T0 + 5 }), T0).events[0]).toMatchObject({ recent_success_age_s: 0 });
  });

  it('probes the model list every 60 s and the canary every 10 min, besides the chat probe', () => {
    const fresh = { ...INITIAL_STATE, lastIntegrityAt: T0 };
    const first = drive(fresh, tick(), T0);
    expect(probes(first)).toEqual(['models@primary', 'chat@primary', 'canary@primary']);
    expect(names(first)).toEqual(['model_list_ok', 'probe_ok', 'canary_ok']);
    expect(probes(drive(first.state, tick(), T0 + 58.9))).toEqual(['chat@primary']);
    expect(probes(drive(first.state, tick(), T0 + 60))).toEqual(['models@primary', 'chat@primary']);
    // A timer's tick a little early still counts (2 %, at most 1 s).
    expect(probes(drive(first.state, tick(), T0 + 59.2))).toEqual(['models@primary', 'chat@primary']);
    expect(probes(drive(first.state, tick(), T0 + 600))).toEqual(['models@primary', 'chat@primary', 'canary@primary']);
  });

  it('checks integrity every 5 min, before the probes, and not at all without a binary', () => {
    const r = drive({ ...S0, lastIntegrityAt: T0 - 300 }, tick(), T0);
    expect(r.actions.map((a) => a.type)).toEqual(['integrity', 'probe']);
    expect(names(r)).toEqual(['integrity_ok', 'probe_ok']);
    expect(drive({ ...S0, lastIntegrityAt: T0 - 298.9 }, tick(), T0).actions.map((a) => a.type)).toEqual(['probe']);
    const none = drive({ ...S0, lastIntegrityAt: null }, tick(), T0, {}, { ...C, integrity: false });
    expect(none.actions.map((a) => a.type)).toEqual(['probe']);
  });

  it('turns a cadence of 0 off', () => {
    const c = { ...C, modelListIntervalS: 0, canaryIntervalS: 0, integrityIntervalS: 0 };
    expect(probes(drive(INITIAL_STATE, tick(), T0, {}, c))).toEqual(['chat@primary']);
  });

  it('halts remediation when 4 distinct root causes are seen within the window', () => {
    const c = { ...CHAT_ONLY, failuresBeforeRestart: 100 };
    let state = S0;
    const causes: RootCause[] = ['timeout', 'timeout', 'refused', 'http_error', 'empty_reply'];
    const exits: (number | null)[] = [];
    let last: Run | null = null;
    for (const [i, cause] of causes.entries()) {
      last = drive(state, tick(), T0 + i * 60, { probe: fail(cause) }, c);
      state = last.state;
      exits.push(last.exit);
    }
    expect(exits).toEqual([null, null, null, null, 2]);
    expect(state.alerting?.reason).toBe('circuit_open');
    const opened = drive(
      { ...S0, causes: { timeout: T0, refused: T0, http_error: T0 } },
      tick(),
      T0 + 1,
      { probe: fail('no_content') },
      c,
    );
    expect(opened.events.map((e) => e.event)).toEqual(['probe_fail', 'circuit_open']);
    expect(opened.events[1]).toEqual({
      event: 'circuit_open',
      level: 'error',
      detail: '4 distinct root causes within 3600 s (http_error, no_content, refused, timeout): remediation halted',
    });
    expect(opened.actions.map((a) => a.type)).toEqual(['probe', 'alert']);
  });

  it('opens the circuit before a restart would be requested, and forgets causes older than the window', () => {
    const causes = { timeout: T0 - 3600, refused: T0 - 10, http_error: T0 - 10 };
    const r = drive({ ...S0, consecutive: 1, lastFailureAt: T0 - 5, causes }, tick(), T0, {
      probe: fail('empty_reply'),
    });
    expect(names(r)).toEqual(['probe_fail', 'restarting', 'restart_requested']);
    expect(Object.keys(r.state.causes).sort()).toEqual(['empty_reply', 'http_error', 'refused']);
    const full = drive(
      { ...S0, consecutive: 1, lastFailureAt: T0 - 5, causes: { ...causes, timeout: T0 - 3599 } },
      tick(),
      T0,
      { probe: fail('empty_reply') },
    );
    expect(names(full)).toEqual(['probe_fail', 'circuit_open']);
    expect(services(full)).toEqual([]);
  });

  it('counts each fatal pattern as its own root cause', () => {
    const causes = { binary_missing: T0, integrity_mismatch: T0, 'fatal:Segmentation fault': T0 };
    const r = drive({ ...S0, causes }, tick({ fatal: { pattern: 'Out of memory', line: 'Out of memory' } }), T0);
    expect(names(r)).toEqual(['circuit_open']);
    expect(r.actions.map((a) => a.type)).toEqual(['alert']);
  });
});

describe('model list, canary, integrity', () => {
  it('counts a model-list failure as a probe failure and skips the rest of the tick', () => {
    const r = drive({ ...S0, lastModelListAt: null }, tick(), T0, {
      probe: (a) =>
        a.probe === 'models' ? { ok: false, ms: 3, cause: 'http_error', snippet: 'HTTP 500' } : { ok: true, ms: 1 },
    });
    expect(names(r)).toEqual(['model_list_fail']);
    expect(r.events[0]).toEqual({
      event: 'model_list_fail',
      level: 'warn',
      probe_ms: 3,
      consecutive: 1,
      snippet: 'HTTP 500',
    });
    expect(probes(r)).toEqual(['models@primary']);
  });

  it('does not let a model list that answers end a failure streak (spec 3.4)', () => {
    const r = drive({ ...S0, lastModelListAt: null, consecutive: 1, lastFailureAt: T0 - 60 }, tick(), T0, {
      probe: (a) =>
        a.probe === 'models' ? { ok: true, ms: 1 } : { ok: false, ms: 1000, cause: 'timeout', snippet: 't' },
    });
    expect(names(r)).toEqual(['model_list_ok', 'probe_fail', 'restarting', 'restart_requested']);
  });

  it('lets a canary reset the count, and counts a failed one', () => {
    const ok = drive({ ...S0, lastCanaryAt: null }, tick(), T0);
    expect(names(ok)).toEqual(['probe_ok', 'canary_ok']);
    const bad = drive({ ...S0, lastCanaryAt: null, consecutive: 1, lastFailureAt: T0 - 60 }, tick(), T0, {
      probe: (a) =>
        a.probe === 'canary' ? { ok: false, ms: 9, cause: 'no_content', snippet: '""' } : { ok: true, ms: 1 },
    });
    expect(names(bad)).toEqual(['probe_ok', 'canary_fail']);
    expect(bad.events[1]).toMatchObject({ consecutive: 1 });
  });

  it('reports a missing binary at error level and alerts once per episode', () => {
    const c = { ...C, modelListIntervalS: 0, canaryIntervalS: 0 };
    const first = drive({ ...S0, lastIntegrityAt: null }, tick(), T0, { integrity: 'missing' }, c);
    expect(names(first)).toEqual(['binary_missing', 'probe_ok']);
    expect(first.actions.filter((a) => a.type === 'alert')).toHaveLength(1);
    const second = drive(first.state, tick(), T0 + 300, { integrity: 'missing' }, c);
    expect(names(second)).toEqual(['binary_missing', 'probe_ok']);
    expect(second.actions.filter((a) => a.type === 'alert')).toHaveLength(0);
    const back = drive(second.state, tick(), T0 + 600, {}, c);
    expect(back.state.binaryMissing).toBe(false);
  });

  it('reports a digest mismatch as an error event', () => {
    const r = drive({ ...S0, lastIntegrityAt: null }, tick(), T0, { integrity: 'mismatch' });
    expect(r.events[0]).toEqual({ event: 'integrity_failed', level: 'error', detail: 'checked' });
    expect(Object.keys(r.state.causes)).toEqual(['integrity_mismatch']);
  });
});

describe('the operator', () => {
  it('reset clears the alerting state, the counters and the causes, and keeps the active backend', () => {
    const state: MachineState = {
      ...S0,
      mode: 'fallback',
      consecutive: 1,
      restarts: [T0 - 1],
      causes: { timeout: T0 },
      alerting: { reason: 'circuit_open', since: T0 - 5, detail: 'four causes', announced: true },
    };
    const r = drive(state, { type: 'reset' }, T0);
    expect(r.events).toEqual([
      { event: 'reset', level: 'info', detail: expect.stringContaining('cleared circuit_open') },
    ]);
    expect(r.exit).toBe(0);
    expect(r.state).toMatchObject({ mode: 'fallback', consecutive: 0, restarts: [], causes: {}, alerting: null });
    expect(drive(r.state, tick({ lock: true }), T0 + 1).exit).toBeNull();
  });
});

describe('invariants (property)', () => {
  const obsArb = fc.oneof(
    fc.record({
      kind: fc.constant('tick' as const),
      fatal: fc.boolean(),
      lock: fc.boolean(),
      busy: fc.boolean(),
      ok: fc.boolean(),
      cause: fc.constantFrom<RootCause>('timeout', 'refused', 'http_error', 'empty_reply'),
    }),
    fc.record({ kind: fc.constant('reset' as const) }),
    fc.record({ kind: fc.constant('restore' as const), verified: fc.boolean() }),
  );

  it('never requests more than 3 restarts in 300 s, never acts while alerting, never falls back from the fallback', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(obsArb, fc.integer({ min: 1, max: 200 })), { maxLength: 60 }), (steps) => {
        let state = S0;
        let now = T0;
        let lock = false;
        const restarts: number[] = [];
        for (const [o, dt] of steps) {
          now += dt;
          const alertingBefore = state.alerting !== null;
          const first: Observation =
            o.kind === 'tick'
              ? tick({
                  lock,
                  fatal: o.fatal ? { pattern: 'Segmentation fault', line: 'x' } : null,
                  lastSuccessAt: o.busy ? now - 1 : null,
                })
              : o.kind === 'reset'
                ? { type: 'reset' }
                : { type: 'restore', verified: o.verified, detail: '', lock };
          const r = drive(state, first, now, {
            probe: () =>
              o.kind === 'tick' && o.ok
                ? { ok: true, ms: 1 }
                : { ok: false, ms: 1, cause: o.kind === 'tick' ? o.cause : 'timeout' },
          });
          if (alertingBefore && o.kind === 'tick') expect(r.actions).toEqual([]);
          for (const a of r.actions) {
            if (a.type === 'service' && a.purpose === 'remediate') restarts.push(now);
            if (a.type === 'write_lock') {
              expect(lock).toBe(false);
              lock = true;
            }
            if (a.type === 'remove_lock') lock = false;
          }
          // Restarts since the last reset/restore (which clear the window on purpose).
          if (o.kind !== 'tick' && r.exit === 0) restarts.length = 0;
          expect(restarts.filter((t) => now - t < C.restartWindowS).length).toBeLessThanOrEqual(C.maxRestarts);
          state = r.state;
        }
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * The pure state machine, row by row of spec 3.1 (DESIGN.md 5), and the fallback that follows a
 * fatal pattern; its limits are in machine-limits.test.ts.
 */
import { describe, expect, it } from '@jest/globals';
import { FATAL_PATTERNS } from '@vigil/shared-types';
import type { MachineState, Observation } from '../src/machine.js';
import { C, drive, fail, names, probes, S0, services, T0, tick, type World } from './machine-driver.js';

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

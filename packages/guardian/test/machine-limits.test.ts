/**
 * The pure state machine, limit by limit of spec 8 (DESIGN.md 5): restarts, the failure count,
 * busy deferral, cadences, the circuit breaker; the model list, canary and integrity checks; the
 * operator's reset; and the invariants over any run.
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { INITIAL_STATE, type MachineState, type Observation, type RootCause } from '../src/machine.js';
import { C, CHAT_ONLY, drive, fail, names, probes, type Run, S0, services, T0, tick } from './machine-driver.js';

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

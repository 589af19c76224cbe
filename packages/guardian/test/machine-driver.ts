/**
 * The pure state machine driven the way the shell drives it: an observation, a decision, the
 * actions answered by a scripted world, until nothing is left to do. Every decision is checked
 * against the contract of actions and events on the way.
 */
import { expect } from '@jest/globals';
import { GUARDIAN_EVENT_FIELDS, GUARDIAN_EXTRA_EVENT_FIELDS } from '@vigil/shared-types';
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

/** The limits of spec 8, every cadence on. */
export const C: MachineConfig = {
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
/** The same with the model list, canary and integrity cadences off (for runs over many ticks). */
export const CHAT_ONLY: MachineConfig = { ...C, modelListIntervalS: 0, canaryIntervalS: 0, integrityIntervalS: 0 };
export const T0 = 1_000_000;
/** Only the chat probe is due (the other cadences were just served). */
export const S0: MachineState = { ...INITIAL_STATE, lastModelListAt: T0, lastCanaryAt: T0, lastIntegrityAt: T0 };

/** What a probe answers: ok, or a failure with its cause (40 ms unless it says). */
export type ProbeAnswer = Omit<Extract<Observation, { type: 'probe' }>, 'type' | 'probe' | 'ms'> & { ms?: number };

export interface World {
  /** Answers probes; default: every probe succeeds in 40 ms. */
  probe?: (a: Extract<Action, { type: 'probe' }>) => ProbeAnswer;
  /** Exit status of service commands (default 0). */
  rc?: (a: Extract<Action, { type: 'service' }>) => number;
  integrity?: Extract<Observation, { type: 'integrity' }>['result'];
  /** Whether a backend waited for after its start serves (default true). */
  serving?: boolean;
  /** Stop driving after this many decisions (a kill in the middle). */
  killAfter?: number;
}

export interface Run {
  state: MachineState;
  events: GuardianEvent[];
  actions: Action[];
  exit: number | null;
}

/** The observation the shell makes of what `a` did in `world`; null for an action that observes nothing. */
function answer(a: Action, world: World): Observation | null {
  switch (a.type) {
    case 'probe':
      return { type: 'probe', probe: a.probe, ms: 40, ...(world.probe?.(a) ?? { ok: true }) };
    case 'service':
      return { type: 'service', op: a.op, target: a.target, purpose: a.purpose, rc: world.rc?.(a) ?? 0, detail: '' };
    case 'integrity':
      return { type: 'integrity', result: world.integrity ?? 'ok', detail: 'checked' };
    case 'await_serving': {
      const ok = world.serving ?? true;
      return {
        type: 'serving',
        target: a.target,
        ok,
        ms: 500,
        detail: ok ? 'served after 0.5 s' : 'no completion within 120 s',
      };
    }
    default:
      return null;
  }
}

/** Drives the machine from `first` until it settles, exits or is killed (`world.killAfter`). */
export function drive(state: MachineState, first: Observation, now: number, world: World = {}, c = C): Run {
  const all: Run = { state, events: [], actions: [], exit: null };
  let obs: Observation | null = first;
  for (let n = 0; obs !== null; n++) {
    if (world.killAfter !== undefined && n >= world.killAfter) break;
    if (n > 50) throw new Error('the machine does not settle');
    const d: Decision = decide(all.state, obs, c, now);
    checkDecision(d);
    all.state = d.state;
    all.events.push(...d.events);
    all.actions.push(...d.actions);
    obs = null;
    for (const a of d.actions) obs = answer(a, world) ?? obs;
    if (d.exit !== null) {
      all.exit = d.exit;
      break;
    }
  }
  return all;
}

const FIELDS: Record<string, readonly string[]> = { ...GUARDIAN_EVENT_FIELDS, ...GUARDIAN_EXTRA_EVENT_FIELDS };

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

export const tick = (over: Partial<Extract<Observation, { type: 'tick' }>> = {}): Observation => ({
  type: 'tick',
  lock: false,
  fatal: null,
  lastSuccessAt: null,
  ...over,
});
export const fail =
  (cause: RootCause, ms = 120, snippet = 'boom') =>
  () => ({ ok: false, ms, cause, snippet });
export const names = (r: Run) => r.events.map((e) => e.event);
export const services = (r: Run) =>
  r.actions.filter((a) => a.type === 'service').map((a) => (a.type === 'service' ? `${a.op} ${a.target}` : ''));
export const probes = (r: Run) =>
  r.actions.filter((a) => a.type === 'probe').map((a) => (a.type === 'probe' ? `${a.probe}@${a.target}` : ''));

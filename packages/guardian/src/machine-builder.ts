/**
 * The working state of one decision (`Builder`): the state being changed, the actions and
 * events decided, and the small steps every transition shares (expiry, alerting, root causes,
 * cadences, the plan).
 */
import {
  type Action,
  type AlertingReason,
  type Decision,
  type EventName,
  event,
  type GuardianEvent,
  type MachineConfig,
  type MachineState,
  type RootCause,
  type Step,
  type Target,
} from './machine-types.js';

/** Seconds rounded to milliseconds: what `recent_success_age_s` carries. */
export const roundS = (s: number) => Math.round(s * 1000) / 1000;

export interface WorkingState extends Omit<MachineState, 'restarts' | 'causes' | 'plan'> {
  restarts: number[];
  causes: Record<string, number>;
  plan: Step[];
}

export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class Builder {
  readonly s: Mutable<WorkingState>;
  readonly actions: Action[] = [];
  readonly events: GuardianEvent[] = [];
  exit: number | null = null;

  constructor(
    state: MachineState,
    readonly c: MachineConfig,
    readonly now: number,
  ) {
    this.s = {
      ...state,
      restarts: [...state.restarts],
      causes: { ...state.causes },
      plan: [...state.plan],
    };
  }

  agent(target: Target = this.s.mode): string {
    return target === 'fallback' ? (this.c.agents.fallback ?? 'fallback') : this.c.agents.primary;
  }

  emit(name: EventName, fields: Record<string, unknown> = {}): void {
    this.events.push(event(name, fields));
  }

  done(): Decision {
    return { state: this.s, actions: this.actions, events: this.events, exit: this.exit };
  }

  /** Forgets restarts and root causes that left their windows, and a failure streak gone stale. */
  expire(): void {
    const { now, c, s } = this;
    s.restarts = s.restarts.filter((t) => now - t < c.restartWindowS && t <= now);
    for (const [cause, at] of Object.entries(s.causes)) {
      if (!(now - at < c.circuitWindowS && at <= now)) delete s.causes[cause];
    }
    if (s.lastFailureAt !== null && !(now - s.lastFailureAt < c.restartWindowS)) s.consecutive = 0;
  }

  /**
   * Enters the alerting state (manual intervention): no remediation until reset or restore. The
   * next guardian started in it writes `alerting` once; later ones only exit 2.
   */
  alert(reason: AlertingReason, detail: string, alertMessage: string): void {
    this.s.alerting = { reason, since: this.now, detail, announced: false };
    this.s.plan = [];
    this.actions.push({ type: 'alert', event: reason, message: alertMessage });
    this.exit = 2;
  }

  /** Records a root cause; true when that opened the circuit (remediation halts, exit 2). */
  cause(cause: RootCause): boolean {
    const { s, c } = this;
    s.causes[cause] = this.now;
    const seen = Object.keys(s.causes).sort();
    if (seen.length < c.circuitBreakerCauses) return false;
    const detail = `${seen.length} distinct root causes within ${c.circuitWindowS} s (${seen.join(', ')}): remediation halted`;
    this.emit('circuit_open', { detail });
    this.alert('circuit_open', detail, `circuit breaker open: ${detail}`);
    return true;
  }

  /**
   * A cadence is due when `every` has passed, give or take a little (2 %, at most 1 s): a timer
   * that starts a tick a few milliseconds early must not push the probe to the next tick.
   */
  due(last: number | null, every: number): boolean {
    const slack = Math.min(1, every * 0.02);
    return every > 0 && (last === null || this.now - last >= every - slack || last > this.now);
  }

  /** Starts the next step of the plan, if any. */
  next(): void {
    const { s } = this;
    const step = s.plan.shift();
    if (step === undefined) return;
    if (step === 'integrity') {
      s.lastIntegrityAt = this.now;
      this.actions.push({ type: 'integrity' });
      return;
    }
    if (step === 'busy') {
      this.actions.push({ type: 'probe', probe: 'busy', target: s.mode });
      return;
    }
    if (step === 'models') s.lastModelListAt = this.now;
    if (step === 'canary') s.lastCanaryAt = this.now;
    s.lastProbeAt = this.now;
    this.actions.push({ type: 'probe', probe: step, target: s.mode });
  }
}

export function clearEpisode(s: Mutable<WorkingState>): void {
  s.mode = 'primary';
  s.alerting = null;
  s.consecutive = 0;
  s.lastFailureAt = null;
  s.restarts = [];
  s.causes = {};
  s.plan = [];
  s.graceUntil = null;
  s.busyAt = null;
  s.activating = null;
}

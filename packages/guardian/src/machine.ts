/**
 * The guardian's decisions, apart from all I/O: `decide(state, observation, config, now)` gives
 * the next state, the actions to perform, the events to log and the exit code (null: go on).
 *
 * It is spec 3.1's table (DESIGN.md 5) plus the limits of spec 8. A tick is a plan of steps
 * (integrity check, model-list probe, chat probe, canary), one action at a time: the shell
 * performs the action and feeds what it saw back as the next observation. At most one action of
 * a decision produces an observation (a probe, an integrity check, a service command), and it is
 * the last one; the others (lock file, alert, log position) produce none.
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
  type Observation,
  type ProbeKind,
  type RootCause,
  type Step,
  type Target,
} from './machine-types.js';

export * from './machine-types.js';

/** Seconds rounded to milliseconds: what `recent_success_age_s` carries. */
const roundS = (s: number) => Math.round(s * 1000) / 1000;

interface WorkingState extends Omit<MachineState, 'restarts' | 'causes' | 'plan'> {
  restarts: number[];
  causes: Record<string, number>;
  plan: Step[];
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

class Builder {
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
    this.actions.push({ type: 'alert', message: alertMessage });
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
    if (step === 'models') s.lastModelListAt = this.now;
    if (step === 'canary') s.lastCanaryAt = this.now;
    s.lastProbeAt = this.now;
    this.actions.push({ type: 'probe', probe: step, target: s.mode });
  }
}

function onTick(b: Builder, o: Extract<Observation, { type: 'tick' }>): void {
  const { s, c, now } = b;
  s.mode = o.lock ? 'fallback' : 'primary';
  s.plan = [];
  s.failedCommands = 0;
  if (s.alerting) {
    // Started (or ticked) while a person is needed: say so once, do nothing, exit 2.
    if (!s.alerting.announced) {
      b.emit('alerting', {
        detail: `${s.alerting.reason} since ${new Date(s.alerting.since * 1000).toISOString()}: ${s.alerting.detail}`,
      });
      s.alerting = { ...s.alerting, announced: true };
    }
    b.exit = 2;
    return;
  }
  b.expire();

  // A fatal pattern in the primary's log, checked before anything that could rate-limit.
  // Never a fallback from the fallback: in fallback mode the primary's log is not acted on.
  if (s.mode === 'primary' && o.fatal) {
    const { pattern, line } = o.fatal;
    const fallback = c.agents.fallback;
    if (fallback === null) {
      const detail = `fatal pattern "${pattern}" in the log of ${b.agent()} and no fallback is configured: ${line}`;
      b.emit('fallback_unavailable', { detail });
      b.alert('fallback_unavailable', detail, `fallback needed but none configured: ${detail}`);
      return;
    }
    if (b.cause(`fatal:${pattern}`)) return;
    s.consecutive = 0;
    s.lastFailureAt = null;
    s.restarts = [];
    s.mode = 'fallback';
    b.actions.push(
      {
        type: 'write_lock',
        lock: {
          what: `fallback active: the primary's log has the fatal pattern "${pattern}"; restarts cannot fix it`,
          since: now,
          pattern,
          line,
          primary: c.agents.primary,
          fallback,
        },
      },
      { type: 'service', op: 'stop', target: 'primary', purpose: 'activate' },
    );
    return;
  }

  if (c.integrity && b.due(s.lastIntegrityAt, c.integrityIntervalS)) s.plan.push('integrity');
  if (o.lastSuccessAt !== null && now - o.lastSuccessAt < c.busyWindowS) {
    // Busy: a client was served recently, which is proof enough; no probe, no escalation.
    b.emit('probe_skip_busy', { recent_success_age_s: roundS(Math.max(0, now - o.lastSuccessAt)) });
  } else {
    if (b.due(s.lastModelListAt, c.modelListIntervalS)) s.plan.push('models');
    s.plan.push('chat');
    if (b.due(s.lastCanaryAt, c.canaryIntervalS)) s.plan.push('canary');
  }
  b.next();
}

const OK_EVENT: Record<ProbeKind, EventName> = { chat: 'probe_ok', models: 'model_list_ok', canary: 'canary_ok' };
const FAIL_EVENT: Record<ProbeKind, EventName> = {
  chat: 'probe_fail',
  models: 'model_list_fail',
  canary: 'canary_fail',
};

function onProbe(b: Builder, o: Extract<Observation, { type: 'probe' }>): void {
  const { s, c, now } = b;
  const probeMs = Math.max(0, Math.round(o.ms));
  if (o.ok) {
    b.emit(OK_EVENT[o.probe], { probe_ms: probeMs, agent: b.agent() });
    if (o.probe !== 'models') {
      // A real completion: the failure streak is over. (A model list proves nothing: spec 3.4.)
      s.consecutive = 0;
      s.lastFailureAt = null;
      s.lastOkAt = now;
    }
    b.next();
    return;
  }
  // One failure per tick: the rest of the plan is dropped.
  s.plan = [];
  s.consecutive += 1;
  s.lastFailureAt = now;
  b.emit(FAIL_EVENT[o.probe], { probe_ms: probeMs, consecutive: s.consecutive, snippet: o.snippet ?? '' });
  if (b.cause(o.cause ?? 'network')) return;
  if (s.consecutive < c.failuresBeforeRestart) return;
  b.expire();
  const agent = b.agent();
  if (s.restarts.length >= c.maxRestarts) {
    b.emit('rate_limit');
    const detail =
      `${s.restarts.length} restarts of ${agent} within ${c.restartWindowS} s and it still fails ` +
      `(${s.consecutive} consecutive failures): restarts stopped until \`guardian reset\` or \`guardian restore\``;
    b.alert('rate_limit', detail, `restart rate limit reached: ${detail}`);
    return;
  }
  s.restarts.push(now);
  s.consecutive = 0;
  b.emit('restarting', { action: 'kickstart', agent });
  b.actions.push({ type: 'service', op: 'restart', target: s.mode, purpose: 'remediate' });
}

function onService(b: Builder, o: Extract<Observation, { type: 'service' }>): void {
  const { s, c } = b;
  const failed = o.rc !== 0;
  if (o.purpose === 'remediate') {
    b.emit('restart_requested', { rc: o.rc });
    if (failed) b.cause('restart_failed');
    return;
  }
  if (failed) {
    s.failedCommands += 1;
    b.emit('service_failed', { action: o.op, agent: b.agent(o.target), rc: o.rc, detail: o.detail });
  }
  if (o.purpose === 'activate') {
    if (o.op === 'stop') {
      b.actions.push({ type: 'service', op: 'start', target: 'fallback', purpose: 'activate' });
      return;
    }
    s.mode = 'fallback';
    b.emit('fallback_activated');
    b.actions.push({
      type: 'alert',
      message:
        `fallback activated: ${c.agents.primary} stopped, ${b.agent('fallback')} started` +
        (s.failedCommands > 0 ? ` (${s.failedCommands} service command(s) failed)` : '') +
        '; run `guardian restore` once the primary is fixed',
    });
    s.failedCommands = 0;
    return;
  }
  // restore: stop the fallback → remove the lock, start the primary → restart the primary.
  if (o.op === 'stop') {
    b.actions.push(
      { type: 'remove_lock' },
      { type: 'skip_primary_log' },
      { type: 'service', op: 'start', target: 'primary', purpose: 'restore' },
    );
    return;
  }
  if (o.op === 'start') {
    b.actions.push({ type: 'service', op: 'restart', target: 'primary', purpose: 'restore' });
    return;
  }
  b.emit('restored', { agent: c.agents.primary });
  b.exit = s.failedCommands > 0 ? 1 : 0;
  s.failedCommands = 0;
  clearEpisode(s);
}

function onIntegrity(b: Builder, o: Extract<Observation, { type: 'integrity' }>): void {
  const { s } = b;
  if (o.result === 'ok') {
    s.binaryMissing = false;
    b.emit('integrity_ok', { detail: o.detail });
  } else if (o.result === 'missing') {
    b.emit('binary_missing');
    if (!s.binaryMissing) b.actions.push({ type: 'alert', message: `binary missing: ${o.detail}` });
    s.binaryMissing = true;
    if (b.cause('binary_missing')) return;
  } else {
    b.emit('integrity_failed', { detail: o.detail });
    if (b.cause('integrity_mismatch')) return;
  }
  b.next();
}

function clearEpisode(s: Mutable<WorkingState>): void {
  s.mode = 'primary';
  s.alerting = null;
  s.consecutive = 0;
  s.lastFailureAt = null;
  s.restarts = [];
  s.causes = {};
  s.plan = [];
}

function onRestore(b: Builder, o: Extract<Observation, { type: 'restore' }>): void {
  const { s, c } = b;
  if (!o.verified) {
    b.emit('restore_refused', { detail: o.detail });
    b.exit = 2;
    return;
  }
  s.failedCommands = 0;
  s.plan = [];
  if (o.lock && c.agents.fallback !== null) {
    b.actions.push({ type: 'service', op: 'stop', target: 'fallback', purpose: 'restore' });
    return;
  }
  if (o.lock) b.actions.push({ type: 'remove_lock' });
  b.actions.push({ type: 'skip_primary_log' }, { type: 'service', op: 'start', target: 'primary', purpose: 'restore' });
}

function onReset(b: Builder): void {
  const { s } = b;
  const was = s.alerting;
  const mode = s.mode;
  clearEpisode(s);
  s.mode = mode; // the lock file, not a reset, decides which backend is active
  b.emit('reset', {
    detail: was
      ? `cleared ${was.reason} (since ${new Date(was.since * 1000).toISOString()}): ${was.detail}`
      : 'nothing to clear: not alerting; failure count, restart window and root causes cleared',
  });
  b.exit = 0;
}

/** The guardian's transition function: pure, deterministic, no I/O. `now` is Unix seconds. */
export function decide(state: MachineState, observation: Observation, config: MachineConfig, now: number): Decision {
  const b = new Builder(state, config, now);
  switch (observation.type) {
    case 'tick':
      onTick(b, observation);
      break;
    case 'probe':
      onProbe(b, observation);
      break;
    case 'service':
      onService(b, observation);
      break;
    case 'integrity':
      onIntegrity(b, observation);
      break;
    case 'restore':
      onRestore(b, observation);
      break;
    case 'reset':
      onReset(b);
      break;
  }
  return b.done();
}

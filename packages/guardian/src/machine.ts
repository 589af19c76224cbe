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

/**
 * Busy deferral (spec 3.1, DESIGN 5): a client's success within the busy window defers the probes,
 * but only for a server that answers its static model list within `busyCheckS` (`answered`): a
 * server that refuses connections or does not answer (crashed, SIGSTOPped) is not busy.
 * `answered` null: not checked yet. 'check': ask the model list; 'skip': `probe_skip_busy`;
 * 'probe': the normal probes.
 */
export function busyDecision(
  lastSuccessAt: number | null,
  now: number,
  busyWindowS: number,
  answered: boolean | null,
): 'check' | 'skip' | 'probe' {
  if (lastSuccessAt === null || !(now - lastSuccessAt < busyWindowS)) return 'probe';
  if (answered === null) return 'check';
  return answered ? 'skip' : 'probe';
}

/** Causes that mean "not up yet" while a backend starts: refused connections, 503 `model_loading`. */
const LOADING_CAUSES: ReadonlySet<RootCause> = new Set(['refused', 'loading']);

/**
 * A failed probe that is a backend still starting within its start-up grace (after a start,
 * restart, restore or fallback of the guardian's): "loading", not a failure.
 */
export function isLoading(graceUntil: number | null, now: number, cause: RootCause | undefined): boolean {
  return graceUntil !== null && now < graceUntil && cause !== undefined && LOADING_CAUSES.has(cause);
}

/** Root causes that are symptoms of a dying primary: a fallback swap replaces them with its one cause. */
const SYMPTOMS: ReadonlySet<string> = new Set([
  'timeout',
  'refused',
  'reset',
  'network',
  'http_error',
  'empty_reply',
  'no_content',
  'loading',
]);

/**
 * The fallback activation: lock file, primary stopped, fallback started, then waited for until it
 * serves. Remembered in the state before any of it is done, so that a run killed in the middle is
 * finished by the next one.
 */
function activate(b: Builder, finding: { pattern: string; line: string }, since: number, resumed: number): void {
  const { s, c } = b;
  s.activating = { pattern: finding.pattern, line: finding.line, since, resumed };
  s.consecutive = 0;
  s.lastFailureAt = null;
  s.restarts = [];
  s.graceUntil = null;
  s.mode = 'fallback';
  b.actions.push(
    {
      type: 'write_lock',
      lock: {
        what: `fallback active: the primary's log has the fatal pattern "${finding.pattern}"; restarts cannot fix it`,
        since,
        pattern: finding.pattern,
        line: finding.line,
        primary: c.agents.primary,
        fallback: b.agent('fallback'),
      },
    },
    { type: 'service', op: 'stop', target: 'primary', purpose: 'activate' },
  );
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
  s.busyAt = null;
  if (s.graceUntil !== null && !(now < s.graceUntil && s.graceUntil - now <= c.startGraceS)) s.graceUntil = null;

  // An activation a kill interrupted: finish it (the lock, the stop and the start are idempotent).
  if (s.activating !== null && c.agents.fallback !== null) {
    const a = s.activating;
    activate(b, a, a.since, a.resumed + 1);
    return;
  }
  s.activating = null;

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
    // The swap is one root cause: the failures that led to it were its symptoms.
    for (const cause of Object.keys(s.causes)) if (SYMPTOMS.has(cause)) delete s.causes[cause];
    if (b.cause(`fatal:${pattern}`)) return;
    activate(b, { pattern, line }, now, 0);
    return;
  }

  if (c.integrity && b.due(s.lastIntegrityAt, c.integrityIntervalS)) s.plan.push('integrity');
  if (busyDecision(o.lastSuccessAt, now, c.busyWindowS, null) === 'check') {
    // A client was served recently: proof enough, if the server still answers its model list.
    s.busyAt = o.lastSuccessAt;
    s.plan.push('busy');
  } else {
    planProbes(b);
  }
  b.next();
}

function planProbes(b: Builder): void {
  const { s, c } = b;
  if (b.due(s.lastModelListAt, c.modelListIntervalS)) s.plan.push('models');
  s.plan.push('chat');
  if (b.due(s.lastCanaryAt, c.canaryIntervalS)) s.plan.push('canary');
}

function onBusyCheck(b: Builder, o: Extract<Observation, { type: 'probe' }>): void {
  const { s, c, now } = b;
  const at = s.busyAt;
  s.busyAt = null;
  if (busyDecision(at, now, c.busyWindowS, o.ok) === 'skip' && at !== null) {
    // Busy: no probe, no escalation.
    b.emit('probe_skip_busy', { recent_success_age_s: roundS(Math.max(0, now - at)) });
  } else {
    // Refused, or no answer within busyCheckS: not busy; the probes find out and count.
    planProbes(b);
  }
  b.next();
}

type Probe = Exclude<ProbeKind, 'busy'>;
const OK_EVENT: Record<Probe, EventName> = { chat: 'probe_ok', models: 'model_list_ok', canary: 'canary_ok' };
const FAIL_EVENT: Record<Probe, EventName> = {
  chat: 'probe_fail',
  models: 'model_list_fail',
  canary: 'canary_fail',
};

function onProbe(b: Builder, o: Extract<Observation, { type: 'probe' }>): void {
  const { s, c, now } = b;
  if (o.probe === 'busy') {
    onBusyCheck(b, o);
    return;
  }
  const probe: Probe = o.probe;
  const probeMs = Math.max(0, Math.round(o.ms));
  if (o.ok) {
    b.emit(OK_EVENT[probe], { probe_ms: probeMs, agent: b.agent() });
    if (probe !== 'models') {
      // A real completion: the failure streak is over. (A model list proves nothing: spec 3.4.)
      s.consecutive = 0;
      s.lastFailureAt = null;
      s.lastOkAt = now;
      s.graceUntil = null;
    }
    b.next();
    return;
  }
  // One failure per tick: the rest of the plan is dropped.
  s.plan = [];
  if (isLoading(s.graceUntil, now, o.cause)) {
    // Still starting after a start, restart, restore or fallback: not a failure, nothing counted.
    const until = new Date((s.graceUntil ?? now) * 1000).toISOString();
    b.emit('probe_loading', {
      probe_ms: probeMs,
      agent: b.agent(),
      detail: `${o.snippet ?? o.cause}; start-up grace until ${until}`,
    });
    return;
  }
  s.consecutive += 1;
  s.lastFailureAt = now;
  b.emit(FAIL_EVENT[probe], { probe_ms: probeMs, consecutive: s.consecutive, snippet: o.snippet ?? '' });
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
    else s.graceUntil = b.now + c.startGraceS;
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
    if (failed) {
      fallbackFailed(b, `the start command of ${b.agent('fallback')} exited with ${o.rc}: ${o.detail}`);
      return;
    }
    // Activated once it serves: wait for it, within its start-up grace.
    b.actions.push({ type: 'await_serving', target: 'fallback', graceS: c.startGraceS });
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
  if (!failed) s.graceUntil = b.now + c.startGraceS;
}

function fallbackFailed(b: Builder, detail: string): void {
  b.s.activating = null;
  b.s.failedCommands = 0;
  const full = `${b.agent('fallback')} does not serve after the fallback activation: ${detail}`;
  b.emit('fallback_failed', { detail: full });
  b.alert('fallback_failed', full, `fallback failed: ${full}; nothing serves completions`);
}

function onServing(b: Builder, o: Extract<Observation, { type: 'serving' }>): void {
  const { s, c } = b;
  const a = s.activating;
  if (!o.ok) {
    fallbackFailed(b, o.detail);
    return;
  }
  s.activating = null;
  s.graceUntil = null;
  s.lastOkAt = b.now;
  b.emit('fallback_activated');
  const resumed =
    a && a.resumed > 0
      ? ` (an activation begun ${new Date(a.since * 1000).toISOString()} was interrupted and finished now)`
      : '';
  b.actions.push({
    type: 'alert',
    message:
      `fallback activated: ${c.agents.primary} stopped, ${b.agent('fallback')} started and serving` +
      (s.failedCommands > 0 ? ` (${s.failedCommands} service command(s) failed)` : '') +
      resumed +
      '; run `guardian restore` once the primary is fixed',
  });
  s.failedCommands = 0;
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
  s.graceUntil = null;
  s.busyAt = null;
  s.activating = null;
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
    case 'serving':
      onServing(b, observation);
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

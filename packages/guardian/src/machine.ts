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

import { Builder, clearEpisode, roundS } from './machine-builder.js';
import { busyDecision, isLoading, SYMPTOMS } from './machine-rules.js';
import type { Decision, EventName, MachineConfig, MachineState, Observation, ProbeKind } from './machine-types.js';

export { busyDecision, isLoading } from './machine-rules.js';
export * from './machine-types.js';

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
  const answer = o.busy ?? (o.ok ? 'unreported' : 'no_answer');
  if (busyDecision(at, now, c.busyWindowS, answer) === 'skip' && at !== null) {
    // Busy: no probe, no escalation.
    b.emit('probe_skip_busy', { recent_success_age_s: roundS(Math.max(0, now - at)) });
  } else {
    // Stalled, idle, refused, or no answer within busyCheckS: not busy; the probes find out and count.
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
  if (o.waitingCpu) {
    // The server's model threads (SCHED_IDLE) wait for CPUs the host's other work holds: the
    // server is sound and a restart would not give it a CPU. Not a failure, nothing counted.
    b.emit('probe_waiting_cpu', {
      probe_ms: probeMs,
      agent: b.agent(),
      detail: `${o.snippet ?? o.cause}; the server reports its model waiting for CPUs other processes hold`,
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
    event: 'fallback_activated',
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
    if (!s.binaryMissing)
      b.actions.push({ type: 'alert', event: 'binary_missing', message: `binary missing: ${o.detail}` });
    s.binaryMissing = true;
    if (b.cause('binary_missing')) return;
  } else {
    b.emit('integrity_failed', { detail: o.detail });
    if (b.cause('integrity_mismatch')) return;
  }
  b.next();
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

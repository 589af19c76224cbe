/**
 * The guardian machine's vocabulary: its state (what the state file keeps), what it observes,
 * the actions it asks the shell for, the events it writes, and the part of the configuration it
 * reads. `machine.ts` is the transition function over these.
 */
import {
  GUARDIAN_EVENT_LEVEL,
  GUARDIAN_EXTRA_EVENT_LEVEL,
  type GuardianConfig,
  type GuardianEventName,
  type GuardianExtraEventName,
  type LogLevel,
  type ServiceAction,
} from '@vigil/shared-types';

export type Target = 'primary' | 'fallback';
/** `busy`: the quick model-list check that a recent client success may defer the probes (18.1). */
export type ProbeKind = 'chat' | 'models' | 'canary' | 'busy';
/**
 * What the server said, within `busyCheckS`, about the work it has (its /health `progress`):
 * - `progressing`: completions in flight, none past its bound;
 * - `idle`: nothing in flight;
 * - `stalled`: a completion has made no progress for longer than the server's bound (503);
 * - `not_serving`: another 503 (loading, stuck sequences);
 * - `unreported`: it answered but reports no progress (a server without it);
 * - `no_answer`: refused, reset, or no reply within busyCheckS (crashed, SIGSTOPped).
 */
export type BusyAnswer = 'progressing' | 'idle' | 'stalled' | 'not_serving' | 'unreported' | 'no_answer';

export type Step = 'integrity' | ProbeKind;
export type Purpose = 'remediate' | 'activate' | 'restore';

/**
 * Root causes the circuit breaker counts: how a probe failed, each fatal pattern
 * (`fatal:<pattern>`), a missing or altered binary, a failed restart command.
 */
export type RootCause =
  | 'timeout'
  | 'refused'
  | 'reset'
  | 'network'
  | 'http_error'
  | 'empty_reply'
  | 'no_content'
  | 'binary_missing'
  | 'integrity_mismatch'
  | 'restart_failed'
  /** HTTP 503 `model_loading`: a failure only once the start-up grace has run out. */
  | 'loading'
  | `fatal:${string}`;

export type AlertingReason = 'rate_limit' | 'circuit_open' | 'fallback_unavailable' | 'fallback_failed';

export interface Alerting {
  readonly reason: AlertingReason;
  /** Unix seconds. */
  readonly since: number;
  readonly detail: string;
  /** A guardian started in this state has written `alerting` (it is written once per episode). */
  readonly announced: boolean;
}

/** What the machine remembers between ticks (the `machine` part of the state file). */
export interface MachineState {
  /** The backend found active at the last tick (the lock file decides). */
  readonly mode: Target;
  readonly consecutive: number;
  readonly lastFailureAt: number | null;
  /** Times of the restart requests still inside the rate-limit window. */
  readonly restarts: readonly number[];
  /** Root cause → when last seen, for those inside the circuit window. */
  readonly causes: Readonly<Record<string, number>>;
  readonly alerting: Alerting | null;
  /** The steps of the tick under way still to do. */
  readonly plan: readonly Step[];
  /** Service commands that failed in the multi-step operation under way (fallback, restore). */
  readonly failedCommands: number;
  readonly binaryMissing: boolean;
  readonly lastProbeAt: number | null;
  readonly lastOkAt: number | null;
  readonly lastModelListAt: number | null;
  readonly lastCanaryAt: number | null;
  readonly lastIntegrityAt: number | null;
  /** Until when (Unix seconds) the active backend is given its start-up grace: loading is not failing. */
  readonly graceUntil: number | null;
  /** The client success whose busy deferral is being checked (the tick under way). */
  readonly busyAt: number | null;
  /** A fallback activation under way (write-ahead: one interrupted by a kill is finished by the next run). */
  readonly activating: Activation | null;
}

export interface Activation extends FatalFinding {
  /** Unix seconds: when it began. */
  readonly since: number;
  /** How many runs took it up again after an interruption. */
  readonly resumed: number;
}

export const INITIAL_STATE: MachineState = {
  mode: 'primary',
  consecutive: 0,
  lastFailureAt: null,
  restarts: [],
  causes: {},
  alerting: null,
  plan: [],
  failedCommands: 0,
  binaryMissing: false,
  lastProbeAt: null,
  lastOkAt: null,
  lastModelListAt: null,
  lastCanaryAt: null,
  lastIntegrityAt: null,
  graceUntil: null,
  busyAt: null,
  activating: null,
};

/** The limits of the configuration the machine reads (the rest is the shell's). */
export const MACHINE_LIMITS = [
  'busyWindowS',
  'failuresBeforeRestart',
  'maxRestarts',
  'restartWindowS',
  'modelListIntervalS',
  'canaryIntervalS',
  'integrityIntervalS',
  'circuitBreakerCauses',
  'circuitWindowS',
  'startGraceS',
] as const;

/** What the machine needs of the configuration: its limits, and of the backends their labels. */
export type MachineConfig = Pick<GuardianConfig, (typeof MACHINE_LIMITS)[number]> & {
  readonly agents: { readonly primary: string; readonly fallback: string | null };
  /** A binary to check is configured. */
  readonly integrity: boolean;
};

export function machineConfigOf(c: GuardianConfig): MachineConfig {
  const limits = Object.fromEntries(MACHINE_LIMITS.map((k) => [k, c[k]])) as Pick<
    GuardianConfig,
    (typeof MACHINE_LIMITS)[number]
  >;
  return {
    ...limits,
    agents: { primary: c.primary.agent, fallback: c.fallback?.agent ?? null },
    integrity: c.primary.binary !== undefined,
  };
}

export interface FatalFinding {
  readonly pattern: string;
  /** The matching log line (trimmed to a reasonable length by the shell). */
  readonly line: string;
}

/** What the lock file says (its presence is what counts; the content is for people). */
export interface LockRecord {
  readonly what: string;
  /** Unix seconds. */
  readonly since: number;
  readonly pattern: string;
  readonly line: string;
  readonly primary: string;
  readonly fallback: string;
}

export type Observation =
  /** The start of a tick: the lock file, the fatal pattern in the new primary log, the latest success in either access log. */
  | {
      readonly type: 'tick';
      readonly lock: boolean;
      readonly fatal: FatalFinding | null;
      readonly lastSuccessAt: number | null;
    }
  | {
      readonly type: 'probe';
      readonly probe: ProbeKind;
      readonly ok: boolean;
      /** The busy check's answer (absent: `ok` says answered, unreported, or not). */
      readonly busy?: BusyAnswer;
      /** A probe that timed out while the server said its model waits for CPUs others hold. */
      readonly waitingCpu?: boolean;
      readonly ms: number;
      readonly cause?: RootCause;
      readonly snippet?: string;
    }
  | {
      readonly type: 'service';
      readonly op: ServiceAction;
      readonly target: Target;
      readonly purpose: Purpose;
      readonly rc: number;
      readonly detail: string;
    }
  /** Whether the backend served a completion before the start-up grace ran out (`await_serving`). */
  | {
      readonly type: 'serving';
      readonly target: Target;
      readonly ok: boolean;
      readonly ms: number;
      readonly detail: string;
    }
  | { readonly type: 'integrity'; readonly result: 'ok' | 'missing' | 'mismatch'; readonly detail: string }
  /** The operator's swap-back: `verified` when the primary binary ran standalone. */
  | { readonly type: 'restore'; readonly verified: boolean; readonly detail: string; readonly lock: boolean }
  /** The operator clears the alerting state. */
  | { readonly type: 'reset' };

export type Action =
  | { readonly type: 'probe'; readonly probe: ProbeKind; readonly target: Target }
  | { readonly type: 'integrity' }
  | { readonly type: 'service'; readonly op: ServiceAction; readonly target: Target; readonly purpose: Purpose }
  | { readonly type: 'write_lock'; readonly lock: LockRecord }
  | { readonly type: 'remove_lock' }
  /** Probe `target` until a completion succeeds or `graceS` runs out; observed as `serving`. */
  | { readonly type: 'await_serving'; readonly target: Target; readonly graceS: number }
  /** Move the primary log's read position to its end: what it said before a restore is history. */
  | { readonly type: 'skip_primary_log' }
  | { readonly type: 'alert'; readonly event: string; readonly message: string };

export type EventName = GuardianEventName | GuardianExtraEventName;

/** An event as decided: the shell adds `ts` when it writes the line. */
export interface GuardianEvent {
  readonly event: EventName;
  readonly level: LogLevel;
  readonly [field: string]: unknown;
}

export interface Decision {
  readonly state: MachineState;
  readonly actions: readonly Action[];
  readonly events: readonly GuardianEvent[];
  /** null: go on; else the process exit code (0 done, 1 done with failures, 2 manual intervention). */
  readonly exit: number | null;
}

/** Actions after which the shell has an observation to feed back. */
export const OBSERVING_ACTIONS: ReadonlySet<Action['type']> = new Set([
  'probe',
  'integrity',
  'service',
  'await_serving',
]);

const LEVELS: Record<EventName, LogLevel> = { ...GUARDIAN_EVENT_LEVEL, ...GUARDIAN_EXTRA_EVENT_LEVEL };

export function event(name: EventName, fields: Record<string, unknown> = {}): GuardianEvent {
  return { event: name, level: LEVELS[name], ...fields };
}

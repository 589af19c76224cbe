/**
 * The guardian's contracts: its log events and their fields (spec 2.5, 6.2), the fatal patterns
 * that trigger the fallback (spec 3.3), the success markers of the access logs (spec 6.3) and
 * the limits of spec 8.
 */

export const GUARDIAN_EVENTS = [
  'probe_ok',
  'probe_fail',
  'restarting',
  'restart_requested',
  'rate_limit',
  'fallback_activated',
  'probe_skip_busy',
  'binary_missing',
] as const;

export type GuardianEventName = (typeof GUARDIAN_EVENTS)[number];

export type LogLevel = 'info' | 'warn' | 'error';

/**
 * One line of the guardian log (newline-delimited JSON). `ts` is Unix time in seconds with a
 * fraction. Each event carries exactly the optional fields that spec 2.5 gives it.
 */
export type GuardianLogRecord =
  | { ts: number; level: LogLevel; event: 'probe_ok'; probe_ms: number; agent: string }
  | { ts: number; level: LogLevel; event: 'probe_fail'; probe_ms: number; consecutive: number; snippet: string }
  | { ts: number; level: LogLevel; event: 'restarting'; action: string; agent: string }
  | { ts: number; level: LogLevel; event: 'restart_requested'; rc: number }
  | { ts: number; level: LogLevel; event: 'rate_limit' }
  | { ts: number; level: LogLevel; event: 'fallback_activated' }
  | { ts: number; level: LogLevel; event: 'probe_skip_busy'; recent_success_age_s: number }
  | { ts: number; level: LogLevel; event: 'binary_missing' };

/** The level each event is logged at (spec 6.2; binary_missing escalates to error). */
export const GUARDIAN_EVENT_LEVEL: Readonly<Record<GuardianEventName, LogLevel>> = {
  probe_ok: 'info',
  probe_fail: 'warn',
  restarting: 'warn',
  restart_requested: 'info',
  rate_limit: 'warn',
  fallback_activated: 'warn',
  probe_skip_busy: 'info',
  binary_missing: 'error',
};

/** The fields each event of spec 6.2 carries besides ts, level and event (spec 2.5), exactly. */
export const GUARDIAN_EVENT_FIELDS: Readonly<Record<GuardianEventName, readonly string[]>> = {
  probe_ok: ['probe_ms', 'agent'],
  probe_fail: ['probe_ms', 'consecutive', 'snippet'],
  restarting: ['action', 'agent'],
  restart_requested: ['rc'],
  rate_limit: [],
  fallback_activated: [],
  probe_skip_busy: ['recent_success_age_s'],
  binary_missing: [],
};

/**
 * Events the spec does not name but the guardian also writes (DESIGN.md 5: the model-list and
 * canary probes, the integrity check, the circuit breaker, the operator's commands, alerts).
 * They reuse the fields of spec 2.5 where one fits; `detail` is their one field of their own.
 */
export const GUARDIAN_EXTRA_EVENTS = [
  'model_list_ok',
  'model_list_fail',
  'canary_ok',
  'canary_fail',
  'integrity_ok',
  'integrity_failed',
  'circuit_open',
  'fallback_unavailable',
  'service_failed',
  'alerting',
  'restored',
  'restore_refused',
  'reset',
  'alert_sent',
  'alert_failed',
  'probe_loading',
  'probe_waiting_cpu',
  'fallback_failed',
  'state_reset',
] as const;

export type GuardianExtraEventName = (typeof GUARDIAN_EXTRA_EVENTS)[number];

export type GuardianExtraLogRecord =
  | { ts: number; level: LogLevel; event: 'model_list_ok' | 'canary_ok'; probe_ms: number; agent: string }
  | {
      ts: number;
      level: LogLevel;
      event: 'model_list_fail' | 'canary_fail';
      probe_ms: number;
      consecutive: number;
      snippet: string;
    }
  | { ts: number; level: LogLevel; event: 'restored'; agent: string }
  | {
      ts: number;
      level: LogLevel;
      event: 'probe_loading' | 'probe_waiting_cpu';
      probe_ms: number;
      agent: string;
      detail: string;
    }
  | { ts: number; level: LogLevel; event: 'service_failed'; action: string; agent: string; rc: number; detail: string }
  | {
      ts: number;
      level: LogLevel;
      event:
        | 'integrity_ok'
        | 'integrity_failed'
        | 'circuit_open'
        | 'fallback_unavailable'
        | 'alerting'
        | 'restore_refused'
        | 'reset'
        | 'alert_sent'
        | 'alert_failed'
        | 'fallback_failed'
        | 'state_reset';
      detail: string;
    };

export const GUARDIAN_EXTRA_EVENT_FIELDS: Readonly<Record<GuardianExtraEventName, readonly string[]>> = {
  model_list_ok: ['probe_ms', 'agent'],
  model_list_fail: ['probe_ms', 'consecutive', 'snippet'],
  canary_ok: ['probe_ms', 'agent'],
  canary_fail: ['probe_ms', 'consecutive', 'snippet'],
  integrity_ok: ['detail'],
  integrity_failed: ['detail'],
  circuit_open: ['detail'],
  fallback_unavailable: ['detail'],
  service_failed: ['action', 'agent', 'rc', 'detail'],
  alerting: ['detail'],
  restored: ['agent'],
  restore_refused: ['detail'],
  reset: ['detail'],
  alert_sent: ['detail'],
  alert_failed: ['detail'],
  probe_loading: ['probe_ms', 'agent', 'detail'],
  probe_waiting_cpu: ['probe_ms', 'agent', 'detail'],
  fallback_failed: ['detail'],
  state_reset: ['detail'],
};

export const GUARDIAN_EXTRA_EVENT_LEVEL: Readonly<Record<GuardianExtraEventName, LogLevel>> = {
  model_list_ok: 'info',
  model_list_fail: 'warn',
  canary_ok: 'info',
  canary_fail: 'warn',
  integrity_ok: 'info',
  integrity_failed: 'error',
  circuit_open: 'error',
  fallback_unavailable: 'error',
  service_failed: 'warn',
  alerting: 'warn',
  restored: 'info',
  restore_refused: 'warn',
  reset: 'info',
  alert_sent: 'info',
  alert_failed: 'warn',
  probe_loading: 'info',
  probe_waiting_cpu: 'warn',
  fallback_failed: 'error',
  state_reset: 'error',
};

/** Strings in the recent primary-backend log that restarts cannot fix (spec 3.3). */
export const FATAL_PATTERNS = [
  'Failed to load the default metallib',
  'library not found',
  'Segmentation fault',
  'manifest verification failed',
  'signature invalid',
  'Out of memory',
  'address already in use',
] as const;

export type FatalPattern = (typeof FATAL_PATTERNS)[number];

/** The first fatal pattern found in the text, or null. */
export function findFatalPattern(text: string): FatalPattern | null {
  for (const pattern of FATAL_PATTERNS) {
    if (text.includes(pattern)) return pattern;
  }
  return null;
}

/** A primary-backend access-log line containing this marks a successful completion. */
export const PRIMARY_SUCCESS_MARKER = 'request completed';

/**
 * True when an access-log line records a successful chat completion: the primary's
 * "request completed", or the fallback's `POST /v1/chat/completions HTTP/1.1` with status 200.
 */
export function isSuccessLogLine(line: string): boolean {
  if (line.includes(PRIMARY_SUCCESS_MARKER)) return true;
  return /POST \/v1\/chat\/completions HTTP\/1\.1"? 200\b/.test(line);
}

/** The limits of spec section 8, as the guardian's configuration defaults. */
export const GUARDIAN_DEFAULTS = {
  intervalS: 60,
  probeBudgetS: 20,
  busyWindowS: 90,
  failuresBeforeRestart: 2,
  maxRestarts: 3,
  restartWindowS: 300,
  modelListIntervalS: 60,
  canaryIntervalS: 600,
  integrityIntervalS: 300,
  circuitBreakerCauses: 4,
  probeMaxTokens: 2,
  probeTemperature: 0,
} as const;

/** The inference liveness probe of a service definition (spec 8). */
export const INFERENCE_LIVENESS = {
  requestTimeoutS: 75,
  probeTimeoutS: 90,
  intervalS: 120,
} as const;

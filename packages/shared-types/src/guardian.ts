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

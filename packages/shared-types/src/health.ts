/**
 * The health check's contracts: its checks in the order they run (DESIGN.md 6, spec 4.5), the
 * status of each, the report and the exit codes (spec 3.2).
 */

export const HEALTH_CHECKS = [
  'signal_port',
  'relay_link',
  'single_daemon',
  'gateway_plugin',
  'forceflow_port',
  'websocket_health',
  'outbound_send',
] as const;

export type HealthCheckName = (typeof HEALTH_CHECKS)[number];

/**
 * ok: healthy as found. healed: was down, repaired by --fix and verified by a re-check.
 * failed: down and not repaired. skipped: not configured (never reported as healthy).
 */
export type HealthStatus = 'ok' | 'healed' | 'failed' | 'skipped';

export const HealthExit = {
  /** Every component healthy. */
  HEALTHY: 0,
  /** One or more were down and are healthy again after the fix. */
  HEALED: 1,
  /** Manual intervention required. */
  MANUAL: 2,
  /** The check itself could not run (bad configuration, another run holds the lock). */
  UNKNOWN: 3,
} as const;

export type HealthExitCode = (typeof HealthExit)[keyof typeof HealthExit];

export interface HealthCheckResult {
  readonly name: HealthCheckName;
  readonly status: HealthStatus;
  readonly detail: string;
  /** The repair attempted, if any, and how it ended. */
  readonly fix?: { readonly action: string; readonly ok: boolean; readonly detail: string };
  readonly durationMs: number;
}

/** One line of the health log, and what --json prints. */
export interface HealthReport {
  /** Unix time in seconds with a fraction. */
  readonly ts: number;
  readonly fix: boolean;
  readonly checks: readonly HealthCheckResult[];
  readonly durationMs: number;
  readonly exitCode: HealthExitCode;
}

/** The exit code of a run from the statuses of its checks. */
export function healthExitCode(statuses: readonly HealthStatus[]): HealthExitCode {
  if (statuses.includes('failed')) return HealthExit.MANUAL;
  if (statuses.includes('healed')) return HealthExit.HEALED;
  return HealthExit.HEALTHY;
}

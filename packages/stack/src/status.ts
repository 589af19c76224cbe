/**
 * `vigil status`: one screen for the whole stack — each service with its state, pid, uptime,
 * restarts and last exit; the guardian's last event; the last health-check result; one line per
 * consumer of the daemon's messages. `--json`: the same as one JSON object.
 */
import type { ConsumerStatus } from '@vigil/shared-types';
import { HealthExit, type HealthReport, lineTime, readTextOrNull } from '@vigil/shared-types/light';
import type { ServiceStatus, SupervisorStatus } from './control.js';
import { lastLines } from './logs.js';
import type { HomePaths } from './paths.js';

/** The guardian's last event: one line of its JSON log (`ts`, `level`, `event`, fields). */
export type GuardianEvent = Record<string, unknown> & { readonly event: string };

export interface StackStatus {
  readonly supervisor: SupervisorStatus;
  readonly services: readonly ServiceStatus[];
  readonly guardian: GuardianEvent | null;
  readonly health: HealthReport | null;
  /** The status page's address while it runs (run/status-page.json), else null. */
  readonly statusPage?: string | null;
  /** The daemon's consumers (its /api/v1/check); null: the daemon did not answer; absent: not asked. */
  readonly consumers?: readonly ConsumerStatus[] | null;
}

function lastJson<T>(file: string, accept: (v: Record<string, unknown>) => boolean): T | null {
  for (const line of lastLines(file, 20).reverse()) {
    try {
      const v = JSON.parse(line) as Record<string, unknown>;
      if (v && typeof v === 'object' && accept(v)) return v as T;
    } catch {
      // not a JSON line (a stack trace, a line of a crashed process)
    }
  }
  return null;
}

/** The last event the guardian logged, or null. */
export const lastGuardianEvent = (paths: HomePaths): GuardianEvent | null =>
  lastJson<GuardianEvent>(paths.log('guardian'), (v) => typeof v.event === 'string');

/** The last health-check report, or null. */
export const lastHealthReport = (paths: HomePaths): HealthReport | null =>
  lastJson<HealthReport>(paths.healthLog, (v) => Array.isArray(v.checks));

/** The status page's address from the file it publishes while it runs, or null. */
export function statusPageUrl(paths: HomePaths): string | null {
  const text = readTextOrNull(paths.statusAddress);
  try {
    const url = text ? (JSON.parse(text) as { url?: unknown }).url : null;
    return typeof url === 'string' ? url : null;
  } catch {
    return null;
  }
}

/** "3 s", "5 min 3 s", "2 h 10 min", "3 d 4 h". */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86_400)
    return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86_400)} d${Math.floor((s % 86_400) / 3600) ? ` ${Math.floor((s % 86_400) / 3600)} h` : ''}`;
}

const ago = (tsSeconds: number | null, now: number): string =>
  tsSeconds === null ? '' : ` ${duration(now / 1000 - tsSeconds)} ago`;

const GUARDIAN_SKIP = new Set(['ts', 'level', 'event', 'msg', 'message', 'service']);

/** "probe_ok (warn) 12 s ago: agent inference-server, probe_ms 34". */
export function describeGuardianEvent(e: GuardianEvent, now: number): string {
  const fields = Object.entries(e)
    .filter(([k, v]) => !GUARDIAN_SKIP.has(k) && v !== null && typeof v !== 'object')
    .map(([k, v]) => `${k} ${typeof v === 'string' ? v.slice(0, 60) : String(v)}`);
  const level = e.level && e.level !== 'info' ? ` (${String(e.level)})` : '';
  return `${e.event}${level}${ago(lineTime(JSON.stringify(e)), now)}${fields.length ? `: ${fields.join(', ')}` : ''}`;
}

/** "healthy (exit 0) 2 min ago", with the checks that were not ok. */
export function describeHealthReport(r: HealthReport, now: number): string {
  const what =
    r.exitCode === HealthExit.HEALTHY
      ? 'healthy'
      : r.exitCode === HealthExit.HEALED
        ? 'repaired'
        : r.exitCode === HealthExit.MANUAL
          ? 'needs you'
          : 'could not run';
  const notOk = r.checks.filter((c) => c.status === 'healed' || c.status === 'failed');
  const detail = notOk.map((c) => `${c.name} ${c.status}${c.detail ? ` (${c.detail.slice(0, 80)})` : ''}`);
  return `${what} (exit ${r.exitCode})${ago(typeof r.ts === 'number' ? r.ts : null, now)}${detail.length ? `: ${detail.join('; ')}` : ''}`;
}

/** "sse connected, 0 held" or "relay away (last seen 3 min ago), 12 held, oldest 41 s". */
export function describeConsumer(c: ConsumerStatus, now: number): string {
  const seen = c.lastSeenAt === null ? 'never connected' : `last seen ${duration((now - c.lastSeenAt) / 1000)} ago`;
  const state = c.connected ? `connected${c.connections > 1 ? ` (${c.connections})` : ''}` : `away (${seen})`;
  const oldest = c.oldestHeldAgeS === null ? '' : `, oldest ${duration(c.oldestHeldAgeS)}`;
  return `${c.name} ${state}, ${c.held} held${oldest}`;
}

function lastExitText(s: ServiceStatus): string {
  if (!s.lastExit) return '-';
  const how = s.lastExit.signal ?? `exit ${s.lastExit.code}`;
  return `${how} at ${s.lastExit.at}`;
}

/** The screen, as lines. `now`: milliseconds since the epoch. */
export function statusScreen(status: StackStatus, home: string, now: number = Date.now()): string[] {
  const sup = status.supervisor;
  const rows = [
    ['service', 'state', 'pid', 'uptime', 'restarts', 'last exit'],
    ...status.services.map((s) => [
      s.name,
      s.state,
      String(s.pid ?? '-'),
      s.startedAt
        ? duration((now - Date.parse(s.startedAt)) / 1000)
        : s.restartAt
          ? `restart in ${duration(Math.max(0, (Date.parse(s.restartAt) - now) / 1000))}`
          : '-',
      String(s.restarts),
      lastExitText(s),
    ]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return [
    `vigil running from ${home} (supervisor pid ${sup.pid}, up ${duration((now - Date.parse(sup.startedAt)) / 1000)})`,
    '',
    ...rows.map((r) => `  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')}`.trimEnd()),
    '',
    `  guardian:  ${status.guardian ? describeGuardianEvent(status.guardian, now) : 'no event yet'}`,
    `  health:    ${status.health ? describeHealthReport(status.health, now) : 'no health check has run yet'}`,
    `  page:      ${status.statusPage ?? 'the status page is not running'}`,
    ...(status.consumers === undefined
      ? []
      : status.consumers === null
        ? ['  consumer:  the daemon did not answer']
        : status.consumers.map((c) => `  consumer:  ${describeConsumer(c, now)}`)),
  ];
}

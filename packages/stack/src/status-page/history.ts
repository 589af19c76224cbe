/**
 * The guardian's and the health check's history, summarised as their logs grow: every probe of
 * the last 24 h (for the heartbeat bars and the latency chart), the restarts and fallbacks among
 * them, counts of every event since the log began, and the last health-check runs. Fed with the
 * lines appended since the last read (LogTail), never the whole file again.
 */
import type { HealthReport } from '@vigil/shared-types';

export type ProbeKind = 'ok' | 'failed' | 'busy' | 'loading';

export interface Probe {
  /** Unix seconds. */
  readonly ts: number;
  readonly kind: ProbeKind;
  readonly ms: number | null;
  readonly agent: string | null;
}

export interface Mark {
  readonly ts: number;
  /** The event: restarting, fallback_activated, restored, rate_limit, circuit_open, … */
  readonly event: string;
}

const PROBE_EVENTS: Readonly<Record<string, ProbeKind>> = {
  probe_ok: 'ok',
  probe_fail: 'failed',
  probe_skip_busy: 'busy',
  probe_loading: 'loading',
  probe_waiting_cpu: 'busy',
};
const MARK_EVENTS = new Set([
  'restarting',
  'fallback_activated',
  'restored',
  'reset',
  'rate_limit',
  'circuit_open',
  'fallback_unavailable',
  'fallback_failed',
]);
/** Events after which a person is needed, until `reset` or `restored`. */
const NEEDS_PERSON = new Set(['rate_limit', 'circuit_open', 'fallback_unavailable', 'fallback_failed', 'alerting']);

export const DAY_S = 86_400;
/** How many health-check runs are kept to show. */
export const HEALTH_ROWS = 50;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export class GuardianHistory {
  /** Probes of the last 24 h (before the newest event), oldest first. */
  probes: Probe[] = [];
  marks: Mark[] = [];
  /** Every event seen since the log began, by name. */
  readonly counts = new Map<string, number>();
  last: Record<string, unknown> | null = null;
  /** The last event that needs a person, unless a reset or restore came after it. */
  needsPerson: Record<string, unknown> | null = null;
  /** The agent of the last probe or restart, and whether the fallback is active per the log. */
  agent: string | null = null;
  fallback = false;
  consecutive = 0;
  private head = 0;

  add(events: readonly Record<string, unknown>[]): void {
    for (const e of events) {
      const event = str(e.event);
      const ts = num(e.ts);
      if (!event || ts === null) continue;
      this.counts.set(event, (this.counts.get(event) ?? 0) + 1);
      this.last = e;
      const kind = PROBE_EVENTS[event];
      if (kind) {
        const agent = str(e.agent);
        if (agent) this.agent = agent;
        this.probes.push({ ts, kind, ms: num(e.probe_ms), agent });
        if (kind === 'ok') this.consecutive = 0;
        if (kind === 'failed') this.consecutive = num(e.consecutive) ?? this.consecutive + 1;
      }
      if (MARK_EVENTS.has(event)) this.marks.push({ ts, event });
      if (NEEDS_PERSON.has(event)) this.needsPerson = e;
      if (event === 'reset' || event === 'restored') this.needsPerson = null;
      if (event === 'fallback_activated') this.fallback = true;
      if (event === 'restored') this.fallback = false;
    }
    this.prune();
  }

  /** Forgets what is older than a day before the newest probe (amortised: one splice per many). */
  private prune(): void {
    const newest = this.probes.at(-1)?.ts ?? 0;
    const cutoff = newest - DAY_S;
    while (this.head < this.probes.length && this.probes[this.head]!.ts < cutoff) this.head++;
    if (this.head > 1024 || this.head > this.probes.length / 2) {
      this.probes = this.probes.slice(this.head);
      this.head = 0;
    }
    if (this.marks.length > 0 && this.marks[0]!.ts < cutoff) this.marks = this.marks.filter((m) => m.ts >= cutoff);
  }

  /** The probes since `from` (Unix seconds), oldest first. */
  since(from: number): Probe[] {
    let lo = this.head;
    let hi = this.probes.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.probes[mid]!.ts < from) lo = mid + 1;
      else hi = mid;
    }
    return this.probes.slice(lo);
  }

  /** The guardian's log was replaced: start again. */
  clear(): void {
    this.probes = [];
    this.marks = [];
    this.counts.clear();
    this.last = null;
    this.needsPerson = null;
    this.agent = null;
    this.fallback = false;
    this.consecutive = 0;
    this.head = 0;
  }
}

export class HealthHistory {
  /** The last runs, newest last. */
  runs: HealthReport[] = [];
  total = 0;
  readonly byExit = new Map<number, number>();

  add(records: readonly Record<string, unknown>[]): void {
    for (const r of records) {
      if (!Array.isArray(r.checks) || num(r.ts) === null) continue;
      const report = r as unknown as HealthReport;
      this.total++;
      this.byExit.set(report.exitCode, (this.byExit.get(report.exitCode) ?? 0) + 1);
      this.runs.push(report);
    }
    if (this.runs.length > HEALTH_ROWS) this.runs = this.runs.slice(-HEALTH_ROWS);
  }

  clear(): void {
    this.runs = [];
    this.total = 0;
    this.byExit.clear();
  }
}

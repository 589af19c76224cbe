/**
 * `--nagios`: one line as a Nagios plugin prints it, `VIGIL STATE - summary | perfdata`, and the
 * plugin's exit code, which is the health check's own (0 OK, 1 WARNING: something was down and
 * is healed, 2 CRITICAL: a person is needed, 3 UNKNOWN: the check could not run).
 */
import type { HealthCheckResult, HealthExitCode, HealthReport, HealthStatus } from '@vigil/shared-types';

const STATE: Readonly<Record<HealthExitCode, string>> = { 0: 'OK', 1: 'WARNING', 2: 'CRITICAL', 3: 'UNKNOWN' };
/** A check's status as a perfdata value (warn 1, crit 2, min 0, max 2); a skipped check is undetermined. */
const VALUE: Readonly<Record<HealthStatus, string>> = { ok: '0', healed: '1', failed: '2', skipped: 'U' };
const SUMMARY_CHARS = 600;

/** Text that may go before the `|`: one line, no `|`, bounded. */
function clean(text: string): string {
  const one = text.replace(/\s+/g, ' ').replace(/\|/g, '/').trim();
  return one.length > SUMMARY_CHARS ? `${one.slice(0, SUMMARY_CHARS - 1)}…` : one;
}

const list = (checks: readonly HealthCheckResult[], what: (c: HealthCheckResult) => string) =>
  checks.map((c) => `${c.name}: ${what(c)}`).join('; ');

function summary(report: HealthReport): string {
  const by = (s: HealthStatus) => report.checks.filter((c) => c.status === s);
  const failed = by('failed');
  const healed = by('healed');
  if (failed.length > 0) return `manual intervention required: ${list(failed, (c) => c.detail)}`;
  if (healed.length > 0) return `healed: ${list(healed, (c) => c.fix?.action ?? c.detail)}`;
  const skipped = by('skipped').length;
  const ok = report.checks.length - skipped;
  return `${ok} check${ok === 1 ? '' : 's'} ok${skipped ? `, ${skipped} skipped (not configured)` : ''}`;
}

/** The plugin's line for a report. */
export function nagiosLine(report: HealthReport): string {
  const perf = report.checks.flatMap((c) => [
    `${c.name}=${VALUE[c.status]};1;2;0;2`,
    `${c.name}_ms=${Math.round(c.durationMs)}ms;;;0`,
  ]);
  perf.push(`duration_ms=${Math.round(report.durationMs)}ms;;;0`);
  return `VIGIL ${STATE[report.exitCode]} - ${clean(summary(report))} | ${perf.join(' ')}\n`;
}

/** The plugin's line when the check could not run (exit 3). */
export function nagiosUnknown(message: string): string {
  return `VIGIL UNKNOWN - the check could not run: ${clean(message)}\n`;
}

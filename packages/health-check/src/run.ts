/** One run: every check in order under the lock, the report appended to the health log, the table. */
import { dirname } from 'node:path';
import { HealthExit, type HealthReport, healthExitCode, terminalSafe } from '@vigil/shared-types';
import { acquireLock, appendFileNoFollow, ensureDir, LockBusyError, PRIVATE_FILE } from '@vigil/shared-types/node';
import { CHECKS, runCheck } from './checks/index.js';
import type { HealthConfig } from './config.js';
import { LockedError } from './errors.js';

/** Takes the lock of overlapping runs (a lock left by a dead run is taken over); returns its release. */
export async function takeLock(file: string): Promise<() => void> {
  try {
    return await acquireLock(file, { waitMs: 0 });
  } catch (err) {
    if (err instanceof LockBusyError) throw new LockedError(err.pid);
    throw err;
  }
}

/**
 * Runs every check in order, repairs with `fix`, appends the report to the health log. `finish`
 * (pings, alerts) runs under the lock once the report is known; what it returns is added to the
 * report (`notifications`) when not empty.
 */
export async function runChecks(
  config: HealthConfig,
  opts: { fix: boolean; finish?: (report: HealthReport) => Promise<readonly unknown[]> },
): Promise<HealthReport> {
  const t0 = Date.now();
  const deadline = t0 + config.timeouts.runMs;
  const release = await takeLock(config.lockFile);
  try {
    const results = [];
    for (const check of CHECKS) {
      results.push(await runCheck(check, { config, fix: opts.fix, now: Date.now(), deadline }));
    }
    let report: HealthReport = {
      ts: t0 / 1000,
      fix: opts.fix,
      checks: results,
      durationMs: Date.now() - t0,
      exitCode: healthExitCode(results.map((r) => r.status)),
    };
    const notes = (await opts.finish?.(report)) ?? [];
    if (notes.length > 0) report = { ...report, notifications: notes } as HealthReport;
    appendReport(config.healthLog, report);
    return report;
  } finally {
    release();
  }
}

/** One JSON line per run. */
export function appendReport(file: string, report: HealthReport | Record<string, unknown>): void {
  ensureDir(dirname(file));
  appendFileNoFollow(file, `${JSON.stringify(report)}\n`, PRIVATE_FILE);
}

const COLOURS = { ok: 32, healed: 33, failed: 31, skipped: 90 } as const;
const VERDICT = {
  [HealthExit.HEALTHY]: 'healthy',
  [HealthExit.HEALED]: 'healed: something was down and is healthy again',
  [HealthExit.MANUAL]: 'manual intervention required',
  [HealthExit.UNKNOWN]: 'the check could not run',
} as const;

/** The human-readable table (colour only on a terminal); what the checks found out is printed terminal-safe. */
export function formatReport(report: HealthReport, colour: boolean): string {
  const paint = (status: keyof typeof COLOURS, text: string) =>
    colour ? `\x1b[${COLOURS[status]}m${text}\x1b[0m` : text;
  const width = Math.max(...report.checks.map((c) => c.name.length), 5);
  const lines = [`${'check'.padEnd(width)}  ${'status'.padEnd(7)}  detail`];
  for (const c of report.checks) {
    lines.push(`${c.name.padEnd(width)}  ${paint(c.status, c.status.padEnd(7))}  ${terminalSafe(c.detail)}`);
    if (c.fix)
      lines.push(
        `${''.padEnd(width)}  ${''.padEnd(7)}  fix: ${c.fix.action}${c.fix.ok ? '' : ` (failed: ${terminalSafe(c.fix.detail)})`}`,
      );
  }
  lines.push('', `${VERDICT[report.exitCode]} (exit ${report.exitCode}, ${report.durationMs} ms)`);
  return `${lines.join('\n')}\n`;
}

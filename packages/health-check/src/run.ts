import { appendFileSync, closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { HealthExit, type HealthReport, healthExitCode } from '@vigil/shared-types';
import { CHECKS, runCheck } from './checks.js';
import type { HealthConfig } from './config.js';

/** Another run holds the lock: this one cannot run (exit 3). */
export class LockedError extends Error {
  constructor(readonly pid: number) {
    super(`another health check (pid ${pid}) is running`);
    this.name = 'LockedError';
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the lock file (O_EXCL); a lock left by a dead run is taken over. Returns its release. */
export function takeLock(file: string): () => void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(readFileSync(file, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0 && alive(pid)) throw new LockedError(pid);
      unlinkSync(file); // stale
    }
  }
  throw new LockedError(0);
}

/** Runs every check in order, repairs with `fix`, appends the report to the health log. */
export async function runChecks(config: HealthConfig, opts: { fix: boolean }): Promise<HealthReport> {
  const t0 = Date.now();
  const deadline = t0 + config.timeouts.runMs;
  const release = takeLock(config.lockFile);
  try {
    const results = [];
    for (const check of CHECKS) {
      results.push(await runCheck(check, { config, fix: opts.fix, now: Date.now(), deadline }));
    }
    const report: HealthReport = {
      ts: t0 / 1000,
      fix: opts.fix,
      checks: results,
      durationMs: Date.now() - t0,
      exitCode: healthExitCode(results.map((r) => r.status)),
    };
    appendReport(config.healthLog, report);
    return report;
  } finally {
    release();
  }
}

/** One JSON line per run. */
export function appendReport(file: string, report: HealthReport | Record<string, unknown>): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  appendFileSync(file, `${JSON.stringify(report)}\n`, { mode: 0o600 });
}

const COLOURS = { ok: 32, healed: 33, failed: 31, skipped: 90 } as const;
const VERDICT = {
  [HealthExit.HEALTHY]: 'healthy',
  [HealthExit.HEALED]: 'healed: something was down and is healthy again',
  [HealthExit.MANUAL]: 'manual intervention required',
  [HealthExit.UNKNOWN]: 'the check could not run',
} as const;

/** The human-readable table (colour only on a terminal). */
export function formatReport(report: HealthReport, colour: boolean): string {
  const paint = (status: keyof typeof COLOURS, text: string) =>
    colour ? `\x1b[${COLOURS[status]}m${text}\x1b[0m` : text;
  const width = Math.max(...report.checks.map((c) => c.name.length), 5);
  const lines = [`${'check'.padEnd(width)}  ${'status'.padEnd(7)}  detail`];
  for (const c of report.checks) {
    lines.push(`${c.name.padEnd(width)}  ${paint(c.status, c.status.padEnd(7))}  ${c.detail}`);
    if (c.fix)
      lines.push(
        `${''.padEnd(width)}  ${''.padEnd(7)}  fix: ${c.fix.action}${c.fix.ok ? '' : ` (failed: ${c.fix.detail})`}`,
      );
  }
  lines.push('', `${VERDICT[report.exitCode]} (exit ${report.exitCode}, ${report.durationMs} ms)`);
  return `${lines.join('\n')}\n`;
}

/** What a check is, what it finds, and how one check (and its repair) runs into a report entry. */
import type { HealthCheckName, HealthCheckResult, HealthStatus } from '@vigil/shared-types';
import type { HealthConfig } from '../config.js';

export interface CheckContext {
  readonly config: HealthConfig;
  readonly fix: boolean;
  /** Unix ms, for windows and ages. */
  readonly now: number;
  /** Unix ms by which every repair of this run has ended (timeouts.runMs after its start). */
  readonly deadline: number;
}

/** What a repair did: `ok` says whether the repair step itself worked. */
export interface Repair {
  readonly action: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** What a check found: healthy, not configured, or a problem and (with --fix) how to repair it. */
export type Finding =
  | { readonly ok: true; readonly detail: string }
  | { readonly skipped: true; readonly detail: string }
  | { readonly ok: false; readonly detail: string; readonly repair?: () => Promise<Repair> };

export interface Check {
  readonly name: HealthCheckName;
  readonly run: (ctx: CheckContext) => Promise<Finding>;
}

export const ok = (detail: string): Finding => ({ ok: true, detail });
export const skipped = (detail: string): Finding => ({ skipped: true, detail });

/** Runs one check (and its repair when asked), bounded, into a result for the report. */
export async function runCheck(check: Check, ctx: CheckContext): Promise<HealthCheckResult> {
  const t0 = Date.now();
  let finding: Finding;
  try {
    finding = await check.run(ctx);
  } catch (err) {
    finding = { ok: false, detail: `the check itself failed: ${(err as Error).message}` };
  }
  const result = (status: HealthStatus, detail: string, fix?: HealthCheckResult['fix']): HealthCheckResult => ({
    name: check.name,
    status,
    detail,
    ...(fix ? { fix } : {}),
    durationMs: Date.now() - t0,
  });
  if ('skipped' in finding) return result('skipped', finding.detail);
  if (finding.ok) return result('ok', finding.detail);
  if (!ctx.fix || !finding.repair) return result('failed', finding.detail);
  if (Date.now() >= ctx.deadline) {
    return result('failed', finding.detail, {
      action: 'none',
      ok: false,
      detail: `not tried: the run has used its ${ctx.config.timeouts.runMs} ms (timeouts.runMs)`,
    });
  }
  let fix: Repair;
  try {
    fix = await finding.repair();
  } catch (err) {
    fix = { action: 'repair', ok: false, detail: `the repair failed: ${(err as Error).message}` };
  }
  if (!fix.ok) return result('failed', finding.detail, fix);
  // Healed only when a fresh look says so.
  let again: Finding;
  try {
    again = await check.run(ctx);
  } catch (err) {
    again = { ok: false, detail: (err as Error).message };
  }
  return 'ok' in again && again.ok
    ? result('healed', `${finding.detail}; now: ${again.detail}`, fix)
    : result('failed', `${finding.detail}; after the fix: ${again.detail}`, fix);
}

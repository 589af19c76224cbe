/** Bringing a service back: its service manager's restart, then a direct relaunch, each verified. */
import type { ServiceManagerConfig } from '@vigil/shared-types';
import { runServiceAction, sleep } from '@vigil/shared-types/node';
import { relaunch } from '../io/relaunch.js';
import type { CheckContext, Repair } from './check.js';

/** Polls until the probe holds, or the time (Unix ms) is up. */
export async function waitUntil(probe: () => Promise<boolean>, deadline: number): Promise<boolean> {
  for (;;) {
    if (await probe()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

/**
 * Brings a service back: the service manager's restart, then (if given) a direct relaunch, each
 * verified by `healthy` within the fix time.
 */
export async function bringBack(
  ctx: CheckContext,
  what: string,
  service: ServiceManagerConfig | undefined,
  relaunchArgv: readonly string[] | undefined,
  healthy: () => Promise<boolean>,
): Promise<Repair> {
  const tried: string[] = [];
  // Each step gets fixMs, and none runs past the run's deadline.
  const stepEnd = () => Math.min(Date.now() + ctx.config.timeouts.fixMs, ctx.deadline);
  if (service) {
    const end = stepEnd();
    const r = await runServiceAction(service, 'restart', Math.max(1, end - Date.now()));
    tried.push(
      `${service.kind} restart ${r.argv ? `(${r.argv.join(' ')})` : ''} rc ${r.rc}${r.rc !== 0 && r.detail ? `: ${r.detail}` : ''}`,
    );
    if (r.rc === 0 && (await waitUntil(healthy, end))) {
      return { action: `restart ${what} through ${service.kind}`, ok: true, detail: tried.join('; ') };
    }
  }
  if (relaunchArgv && relaunchArgv.length > 0 && Date.now() < ctx.deadline) {
    const end = stepEnd();
    const r = await relaunch(relaunchArgv, ctx.config.daemon.relaunchLog);
    let note = r.pid ? ` (pid ${r.pid})` : '';
    if (r.error) note += `: ${r.error}`;
    else {
      // Until it answers, or it has ended (a program that dies at once is not waited for).
      await waitUntil(async () => r.exitCode() !== null || (await healthy()), end);
      if (await healthy()) {
        tried.push(`relaunch ${relaunchArgv[0]}${note}`);
        return { action: `relaunch ${what}`, ok: true, detail: tried.join('; ') };
      }
      const log = ctx.config.daemon.relaunchLog;
      if (r.exitCode() !== null) note += `: exited with ${r.exitCode()}${log ? ` (its output: ${log})` : ''}`;
    }
    tried.push(`relaunch ${relaunchArgv[0]}${note}`);
  }
  if (tried.length === 0)
    return { action: 'none', ok: false, detail: `no service manager or relaunch configured for ${what}` };
  return { action: `restart ${what}`, ok: false, detail: `${tried.join('; ')}; still down` };
}

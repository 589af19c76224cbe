/**
 * Who runs the stack's services, as the status page sees them (`--restart-with`): `vigil start`'s
 * supervisor (its control socket), the systemd user units or the launchd agents of `vigil
 * install`, compose (containers the page cannot reach: it says how to restart them), or nobody
 * (`none`). For each: the services' state, read with one bounded call, and the argv of a restart
 * or a start (`@vigil/shared-types`' serviceArgv, as the guardian and the health check drive the
 * same managers).
 */
import { constants } from 'node:os';
import { type ServiceManagerConfig, serviceArgv } from '@vigil/shared-types';
import { currentUid, runCommand } from '@vigil/shared-types/node';
import { controlRequest, type ServiceStatus, type SupervisorStatus } from '../control.js';
import { SERVICE_NAMES } from '../service-names.js';

import type { RestartWith } from './restart-with.js';

export type { RestartWith } from './restart-with.js';

/** The services of an installed stack: the supervisor's, and the health check's timer job. */
export const INSTALLED_SERVICES = [...SERVICE_NAMES, 'health-check'] as const;
export const unitOf = (service: string): string => `vigil-${service}.service`;
export const labelOf = (service: string): string => `org.vigil.${service}`;

/** A service as the page shows it; `scheduled`: a timer job between its runs. */
export interface PageService {
  readonly name: string;
  readonly state: ServiceStatus['state'] | 'scheduled';
  readonly pid: number | null;
  readonly startedAt: string | null;
  readonly restarts: number | null;
  readonly restartAt?: string | null | undefined;
  readonly lastExit: ServiceStatus['lastExit'];
}

export type ServicesView =
  | { readonly by: 'supervisor'; readonly supervisor: SupervisorStatus; readonly list: readonly PageService[] }
  | { readonly by: 'systemd' | 'launchd'; readonly list: readonly PageService[] }
  | { readonly by: 'compose' | 'none' }
  | { readonly by: RestartWith; readonly error: string };

export interface ManagerConfig {
  readonly restartWith: RestartWith;
  readonly home: string;
  readonly socket: string;
}

/** The service manager entry of a service under systemd (the user's units) or launchd (gui/UID). */
export function managerOf(by: 'systemd' | 'launchd', service: string): ServiceManagerConfig {
  return by === 'systemd'
    ? { kind: 'systemd', unit: unitOf(service), user: true }
    : { kind: 'launchd', label: labelOf(service) };
}

/** The argv that restarts (or starts) a service under systemd or launchd. */
export const actionArgv = (by: 'systemd' | 'launchd', service: string, action: 'restart' | 'start'): string[] =>
  serviceArgv(managerOf(by, service), action, currentUid())!;

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([k, v]) => [v as number, k]));
const signalName = (n: number) => SIGNAL_NAMES.get(n) ?? `signal ${n}`;
const unixIso = (v: string | undefined) =>
  v?.startsWith('@') ? new Date(Number(v.slice(1)) * 1000).toISOString() : null;

const SYSTEMD_PROPERTIES =
  'Id,LoadState,ActiveState,SubState,MainPID,NRestarts,ExecMainStartTimestamp,ExecMainExitTimestamp,ExecMainCode,ExecMainStatus';

/** `systemctl --user show` of the units (blocks of KEY=VALUE, in the order asked) as page services. */
export function parseSystemdShow(text: string): PageService[] {
  const out: PageService[] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const p = Object.fromEntries(
      block
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    const name = /^vigil-(.+)\.service$/.exec(p.Id ?? '')?.[1];
    if (!name || p.LoadState === 'not-found') continue;
    const active = p.ActiveState ?? '';
    const state: PageService['state'] =
      active === 'failed'
        ? 'failed'
        : p.SubState === 'auto-restart'
          ? 'restarting'
          : ['active', 'activating', 'deactivating', 'reloading'].includes(active)
            ? 'running'
            : name === 'health-check'
              ? 'scheduled'
              : 'stopped';
    const pid = Number(p.MainPID) > 0 ? Number(p.MainPID) : null;
    const exitAt = unixIso(p.ExecMainExitTimestamp);
    const code = Number(p.ExecMainCode); // 1 exited, 2 killed, 3 dumped core
    const status = Number(p.ExecMainStatus);
    out.push({
      name,
      state,
      pid,
      startedAt: state === 'running' ? unixIso(p.ExecMainStartTimestamp) : null,
      restarts: Number.isInteger(Number(p.NRestarts)) && p.NRestarts !== '' ? Number(p.NRestarts) : null,
      lastExit: exitAt
        ? { code: code === 1 ? status : null, signal: code === 2 || code === 3 ? signalName(status) : null, at: exitAt }
        : null,
    });
  }
  return out;
}

/** `launchctl list` (PID, last exit status, label) as page services: every agent of the stack, loaded or not. */
export function parseLaunchctlList(text: string): PageService[] {
  const jobs = new Map<string, { pid: number | null; status: number | null }>();
  for (const line of text.split('\n')) {
    const [pid, status, label] = line.trim().split(/\t+|\s{2,}/);
    if (!label?.startsWith('org.vigil.')) continue;
    jobs.set(label, {
      pid: /^\d+$/.test(pid ?? '') ? Number(pid) : null,
      status: /^-?\d+$/.test(status ?? '') ? Number(status) : null,
    });
  }
  return INSTALLED_SERVICES.map((name) => {
    const job = jobs.get(labelOf(name));
    const timer = name === 'health-check' || name === 'guardian'; // StartInterval jobs
    const s = job?.status ?? null;
    const state: PageService['state'] = !job
      ? 'stopped'
      : job.pid !== null
        ? 'running'
        : s === 2 || s === 78
          ? 'failed'
          : timer
            ? 'scheduled'
            : s === 0
              ? 'stopped'
              : 'restarting';
    // launchd keeps the status of the last exit, not when it was: "at" stays empty.
    const lastExit =
      s !== null && s !== 0 ? { code: s > 0 ? s : null, signal: s < 0 ? signalName(-s) : null, at: '' } : null;
    return { name, state, pid: job?.pid ?? null, startedAt: null, restarts: null, lastExit };
  });
}

/** The services now, as the manager says, each ask bounded by `timeoutMs`. */
export async function servicesView(config: ManagerConfig, timeoutMs: number): Promise<ServicesView> {
  const by = config.restartWith;
  if (by === 'compose' || by === 'none') return { by };
  if (by === 'supervisor') {
    try {
      const r = await controlRequest(config.home, config.socket, { action: 'status' }, timeoutMs);
      return { by, supervisor: r.supervisor!, list: r.services ?? [] };
    } catch (err) {
      return { by, error: (err as Error).message };
    }
  }
  const argv =
    by === 'systemd'
      ? [
          'systemctl',
          '--user',
          'show',
          '--timestamp=unix',
          `--property=${SYSTEMD_PROPERTIES}`,
          ...INSTALLED_SERVICES.map(unitOf),
        ]
      : ['launchctl', 'list'];
  const r = await runCommand(argv, timeoutMs, { maxOutputBytes: 1 << 16 });
  if (r.rc !== 0) return { by, error: `${argv.slice(0, 3).join(' ')} exited with ${r.rc}: ${r.detail}` };
  return { by, list: by === 'systemd' ? parseSystemdShow(r.stdout) : parseLaunchctlList(r.stdout) };
}

/** What to run by hand where the page cannot act (compose, none). */
export function howToRestart(by: RestartWith, service: string): string {
  if (by === 'compose') return `docker compose -f docker/compose.yaml restart ${service}`;
  if (by === 'systemd') return `systemctl --user restart ${unitOf(service)}`;
  if (by === 'launchd') return `launchctl kickstart -k gui/$(id -u)/${labelOf(service)}`;
  return `vigil restart ${service}, or the command of the service manager that runs it`;
}

export interface ActionOutcome {
  readonly ok: boolean;
  readonly detail: string;
  /** The argv run (systemd, launchd), for the actions log. */
  readonly argv?: readonly string[];
}

/** Restarts or starts one service through the manager, within `timeoutMs`. */
export async function serviceAction(
  config: ManagerConfig,
  service: string,
  action: 'restart' | 'start',
  timeoutMs: number,
): Promise<ActionOutcome> {
  const by = config.restartWith;
  if (by === 'compose' || by === 'none') {
    return {
      ok: false,
      detail: `the status page cannot ${action} services here (${by}): run ${howToRestart(by, service)}`,
    };
  }
  if (by === 'supervisor') {
    try {
      const r = await controlRequest(config.home, config.socket, { action, service }, timeoutMs);
      return { ok: true, detail: `${service} started (pid ${r.pid ?? '?'})` };
    } catch (err) {
      return { ok: false, detail: (err as Error).message };
    }
  }
  const argv = actionArgv(by, service, action);
  const r = await runCommand(argv, timeoutMs);
  return {
    ok: r.rc === 0,
    detail: r.rc === 0 ? `${argv.join(' ')}: done` : `${argv.join(' ')} exited with ${r.rc}: ${r.detail}`,
    argv,
  };
}

import { readFileSync } from 'node:fs';
import {
  formatHostPort,
  type HealthCheckName,
  type HealthCheckResult,
  type HealthStatus,
  SEND_SUCCEEDED_LOG,
  type ServiceManagerConfig,
} from '@vigil/shared-types';
import type { HealthConfig } from './config.js';
import {
  daemonStatus,
  establishedTo,
  findProcesses,
  killAll,
  listenersOn,
  relaunch,
  rpcCall,
  serviceAction,
  sleep,
  tailLines,
  tcpAccepts,
  writeAtomic,
} from './io.js';

export interface CheckContext {
  readonly config: HealthConfig;
  readonly fix: boolean;
  /** Unix ms, for windows and ages. */
  readonly now: number;
  /** Unix ms by which every repair of this run has ended (timeouts.runMs after its start). */
  readonly deadline: number;
}

/** What a check found: healthy, not configured, or a problem and (with --fix) how to repair it. */
export type Finding =
  | { readonly ok: true; readonly detail: string }
  | { readonly skipped: true; readonly detail: string }
  | {
      readonly ok: false;
      readonly detail: string;
      readonly repair?: () => Promise<{ action: string; ok: boolean; detail: string }>;
    };

export interface Check {
  readonly name: HealthCheckName;
  readonly run: (ctx: CheckContext) => Promise<Finding>;
}

const ok = (detail: string): Finding => ({ ok: true, detail });
const skipped = (detail: string): Finding => ({ skipped: true, detail });

/** Polls until the probe holds, or the time (Unix ms) is up. */
async function waitUntil(probe: () => Promise<boolean>, deadline: number): Promise<boolean> {
  for (;;) {
    if (await probe()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(100);
  }
}

async function versionOf(ctx: CheckContext): Promise<string> {
  const result = (await rpcCall(ctx.config.daemon.http, 'version', undefined, ctx.config.timeouts.checkMs)) as {
    version?: unknown;
  };
  if (typeof result?.version !== 'string') throw new Error('the reply has no result.version');
  return result.version;
}

const answers = (ctx: CheckContext) => () =>
  versionOf(ctx).then(
    () => true,
    () => false,
  );

/**
 * Brings a service back: the service manager's restart, then (if given) a direct relaunch, each
 * verified by `healthy` within the fix time.
 */
async function bringBack(
  ctx: CheckContext,
  what: string,
  service: ServiceManagerConfig | undefined,
  relaunchArgv: readonly string[] | undefined,
  healthy: () => Promise<boolean>,
): Promise<{ action: string; ok: boolean; detail: string }> {
  const tried: string[] = [];
  // Each step gets fixMs, and none runs past the run's deadline.
  const stepEnd = () => Math.min(Date.now() + ctx.config.timeouts.fixMs, ctx.deadline);
  if (service) {
    const end = stepEnd();
    const r = await serviceAction(service, 'restart', Math.max(1, end - Date.now()));
    tried.push(
      `${service.kind} restart ${r.argv ? `(${r.argv.join(' ')})` : ''} rc ${r.rc}${r.rc !== 0 && r.output ? `: ${r.output}` : ''}`,
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

export const signalPort: Check = {
  name: 'signal_port',
  async run(ctx) {
    const d = ctx.config.daemon;
    try {
      return ok(`version ${await versionOf(ctx)} at ${formatHostPort(d.http)}`);
    } catch (err) {
      return {
        ok: false,
        detail: `JSON-RPC version on ${formatHostPort(d.http)} failed: ${(err as Error).message}`,
        repair: () => bringBack(ctx, 'the daemon', d.service, d.relaunch, answers(ctx)),
      };
    }
  },
};

export const relayLink: Check = {
  name: 'relay_link',
  async run(ctx) {
    const relay = ctx.config.relay;
    if (!relay) return skipped('no relay configured');
    const link = formatHostPort(relay.link);
    const up = () => tcpAccepts(relay.link, ctx.config.timeouts.checkMs);
    if (await up()) return ok(`${link} accepts connections`);
    return {
      ok: false,
      detail: `${link} refuses or does not answer`,
      repair: () => bringBack(ctx, 'the relay', relay.service, undefined, up),
    };
  },
};

export const singleDaemon: Check = {
  name: 'single_daemon',
  async run(ctx) {
    const { daemon, retiredPorts, timeouts } = ctx.config;
    const procs = await findProcesses({ program: daemon.program, match: daemon.processMatch });
    const occupied: number[] = [];
    for (const port of retiredPorts) {
      if (await tcpAccepts({ host: '127.0.0.1', port }, Math.min(timeouts.checkMs, 1000))) occupied.push(port);
    }
    const problems: string[] = [];
    if (procs.length !== 1) {
      problems.push(
        `${procs.length} daemon processes (${procs.map((p) => p.pid).join(', ') || 'none'}) run ${[daemon.program, ...daemon.processMatch].join(' … ')}`,
      );
    }
    if (occupied.length > 0) problems.push(`something answers on retired port ${occupied.join(', ')}`);
    if (problems.length === 0)
      return ok(`one daemon (pid ${procs[0]!.pid}); retired ports ${retiredPorts.join(', ')} silent`);
    return {
      ok: false,
      detail: problems.join('; '),
      repair: async () => {
        const done: string[] = [];
        let fine = true;
        for (const port of occupied) {
          const pids = await listenersOn(port);
          const gone = pids.length > 0 && (await killAll(pids));
          done.push(pids.length > 0 ? `killed ${pids.join(', ')} on ${port}` : `no owner found for ${port}`);
          fine &&= gone;
        }
        if (procs.length > 1) {
          await killAll(procs.map((p) => p.pid));
          const back = await bringBack(ctx, 'the daemon', daemon.service, daemon.relaunch, answers(ctx));
          done.push(`killed ${procs.length} daemons; ${back.detail}`);
          fine &&= back.ok;
        } else if (procs.length === 0) {
          done.push('no daemon process to keep');
          fine = false;
        }
        return { action: done.join('; '), ok: fine, detail: done.join('; ') };
      },
    };
  },
};

export const gatewayPlugin: Check = {
  name: 'gateway_plugin',
  async run(ctx) {
    const g = ctx.config.gateway;
    if (!g) return skipped('no flow gateway configured');
    const probe = async (): Promise<string | null> => {
      if (!(await tcpAccepts(g.address, ctx.config.timeouts.checkMs)))
        return `the gateway ${formatHostPort(g.address)} is down`;
      const status = await daemonStatus(ctx.config.daemon.http, ctx.config.timeouts.checkMs);
      // The gateway follows the HTTP event stream: TCP clients (the relay's guests) are not it.
      const consumers = status ? status.consumers.sse : await establishedTo(ctx.config.daemon.http.port);
      return consumers > 0
        ? null
        : `no consumer holds a connection to the daemon on ${formatHostPort(ctx.config.daemon.http)}`;
    };
    const problem = await probe();
    if (problem === null) return ok(`gateway ${formatHostPort(g.address)} up, consumer connected to the daemon`);
    return {
      ok: false,
      detail: problem,
      repair: () => bringBack(ctx, 'the flow service', g.service, undefined, async () => (await probe()) === null),
    };
  },
};

/** Reads a dotted key ("channels.signal.port") of a JSON object; the parent and the last key. */
function locate(root: unknown, key: string): { parent: Record<string, unknown>; last: string } | null {
  const parts = key.split('.');
  let node = root;
  for (const p of parts.slice(0, -1)) {
    if (typeof node !== 'object' || node === null) return null;
    node = (node as Record<string, unknown>)[p];
  }
  if (typeof node !== 'object' || node === null) return null;
  return { parent: node as Record<string, unknown>, last: parts.at(-1)! };
}

/** The port a value names: a number, "8080", "127.0.0.1:8080" or a URL. */
export function portOf(value: unknown): number | null {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value !== 'string') return null;
  if (/^\d+$/.test(value)) return Number(value);
  const m = /:(\d+)(?:[/?#]|$)/.exec(value);
  return m ? Number(m[1]) : null;
}

/** The same value, pointing at another port, in the form it had. */
export function withPort(value: unknown, port: number): unknown {
  if (typeof value === 'number') return port;
  if (typeof value === 'string' && /^\d+$/.test(value)) return String(port);
  return String(value).replace(/:(\d+)(?=[/?#]|$)/, `:${port}`);
}

export const forceflowPort: Check = {
  name: 'forceflow_port',
  async run(ctx) {
    const f = ctx.config.flowConfig;
    if (!f) return skipped('no flow configuration file configured');
    const want = ctx.config.daemon.http.port;
    let text: string;
    let root: unknown;
    try {
      text = readFileSync(f.path, 'utf8');
      root = JSON.parse(text);
    } catch (err) {
      return { ok: false, detail: `cannot read ${f.path}: ${(err as Error).message}` };
    }
    const at = locate(root, f.key);
    const value = at?.parent[at.last];
    const port = portOf(value);
    if (port === want) return ok(`${f.path} ${f.key} = ${JSON.stringify(value)}`);
    const detail =
      value === undefined
        ? `${f.path} has no ${f.key}`
        : `${f.path} ${f.key} = ${JSON.stringify(value)}, not port ${want}`;
    if (!at || value === undefined) return { ok: false, detail };
    return {
      ok: false,
      detail,
      repair: async () => {
        const backup = `${f.path}.bak-${new Date(ctx.now).toISOString().replace(/[:.]/g, '-')}`;
        writeAtomic(backup, text);
        at.parent[at.last] = withPort(value, want);
        writeAtomic(f.path, `${JSON.stringify(root, null, 2)}\n`);
        const service = ctx.config.gateway?.service;
        const restarted = service
          ? await serviceAction(
              service,
              'restart',
              Math.min(ctx.config.timeouts.fixMs, Math.max(1, ctx.deadline - Date.now())),
            )
          : null;
        const now = portOf(locate(JSON.parse(readFileSync(f.path, 'utf8')), f.key)?.parent[at.last]);
        const fine = now === want && (restarted === null || restarted.rc === 0);
        return {
          action: `patched ${f.key} to ${JSON.stringify(at.parent[at.last])} (backup ${backup})${restarted ? `; flow service restart rc ${restarted.rc}` : ''}`,
          ok: fine,
          detail: fine ? 'configuration points at the daemon again' : 'the patch or the restart did not take',
        };
      },
    };
  },
};

/** The time of a log line: a JSON record's ts/time/timestamp, or a leading ISO-8601 time. */
export function lineTime(line: string): number | null {
  const t = line.trimStart();
  if (t.startsWith('{')) {
    try {
      const rec = JSON.parse(t) as Record<string, unknown>;
      const v = rec.ts ?? rec.time ?? rec.timestamp;
      if (typeof v === 'number') return v < 1e12 ? v * 1000 : v; // seconds or ms
      if (typeof v === 'string') {
        const ms = Date.parse(v);
        return Number.isNaN(ms) ? null : ms;
      }
    } catch {
      return null;
    }
    return null;
  }
  const m = /^\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)/.exec(t);
  if (!m) return null;
  const ms = Date.parse(m[1]!.replace(' ', 'T'));
  return Number.isNaN(ms) ? null : ms;
}

export const websocketHealth: Check = {
  name: 'websocket_health',
  async run(ctx) {
    const g = ctx.config.gateway;
    if (!g?.log) return skipped('no gateway log configured');
    const { pattern, threshold, windowMinutes } = g.storm;
    const re = new RegExp(pattern, 'i');
    const since = ctx.now - windowMinutes * 60_000;
    let count = 0;
    for (const line of tailLines(g.log)) {
      if (!re.test(line)) continue;
      const t = lineTime(line);
      if (t !== null && t >= since) count++;
    }
    const detail = `${count} WebSocket connections in the last ${windowMinutes} min (storm at ${threshold})`;
    return count >= threshold ? { ok: false, detail: `connection storm: ${detail}` } : ok(detail);
  },
};

export const outboundSend: Check = {
  name: 'outbound_send',
  async run(ctx) {
    const { daemon, outbound, timeouts } = ctx.config;
    if (outbound.probe) {
      const { recipient, noteToSelf, message } = outbound.probe;
      try {
        const r = (await rpcCall(
          daemon.http,
          'send',
          { ...(recipient ? { recipient: [recipient] } : {}), ...(noteToSelf ? { noteToSelf: true } : {}), message },
          timeouts.checkMs,
        )) as { timestamp?: number };
        return ok(`a real send succeeded now (timestamp ${r?.timestamp})`);
      } catch (err) {
        return { ok: false, detail: `a real send failed: ${(err as Error).message}` };
      }
    }
    const status = await daemonStatus(daemon.http, timeouts.checkMs);
    let last = status?.lastOutboundSendAt ?? null;
    if (daemon.log) {
      for (const line of tailLines(daemon.log)) {
        if (!line.includes(SEND_SUCCEEDED_LOG)) continue;
        const t = lineTime(line);
        if (t !== null && (last === null || t > last)) last = t;
      }
    }
    const maxMs = outbound.maxAgeHours * 3_600_000;
    if (last === null) {
      return skipped('no outbound send seen yet (configure outbound.probe to make one, or daemon.log to read them)');
    }
    const age = ctx.now - last;
    const ageText = age < 120_000 ? `${Math.round(age / 1000)} s` : `${(age / 3_600_000).toFixed(1)} h`;
    return age <= maxMs
      ? ok(`last successful send ${ageText} ago`)
      : { ok: false, detail: `last successful send ${ageText} ago (more than ${outbound.maxAgeHours} h)` };
  },
};

/** The checks, in the order they run (spec 4.5, DESIGN.md 6). */
export const CHECKS: readonly Check[] = [
  signalPort,
  relayLink,
  singleDaemon,
  gatewayPlugin,
  forceflowPort,
  websocketHealth,
  outboundSend,
];

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
  let fix: { action: string; ok: boolean; detail: string };
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

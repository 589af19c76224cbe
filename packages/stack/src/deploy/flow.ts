/**
 * `vigil install`: renders vigil's launchd agents or systemd user units with this user's paths,
 * writes the guardian's and the health check's configurations, and loads the services.
 * Idempotent: a file whose rendering has not changed is not rewritten and its service is not
 * reloaded. `vigil uninstall` unloads and removes what install wrote (never data, state or logs).
 * See deploy/README.md.
 */
import { rmdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ConfigError,
  ensureDir,
  fileExists,
  PRIVATE_DIR,
  readTextOrNull,
  removeFile,
  writeFileAtomic,
} from '@vigil/shared-types/light';
import { type CommandRecord, launchdLoad, type PlannedFile, Session, systemdLoad, unload } from './manager.js';
import { type InstallOptions, type Locations, type Platform, SERVICES } from './options.js';
import { renderAll, validateConfigs } from './render.js';

/** What install or uninstall did (or, dry, would do): printed, or with --json one JSON object. */
export interface DeployResult {
  readonly command: 'install' | 'uninstall';
  readonly platform: Platform;
  readonly dryRun: boolean;
  readonly locations: Locations;
  readonly model?: string;
  readonly modelId?: string;
  readonly directories?: string[];
  readonly files: { path: string; action: string; mode?: string }[];
  readonly commands: CommandRecord[];
  readonly validated?: string[];
  readonly notes: string[];
  readonly failed: number;
}

export async function install(o: InstallOptions, loc: Locations): Promise<DeployResult> {
  if (!fileExists(o.node)) throw new ConfigError(`--node ${o.node} does not exist`);
  const rendered = renderAll(o, loc);
  if (!rendered.defaultModel && !fileExists(rendered.model)) {
    throw new ConfigError(`--model ${rendered.model} does not exist`);
  }
  const validated = validateConfigs(rendered.files);
  const files: PlannedFile[] = rendered.files.map((f) => {
    const old = readTextOrNull(f.path);
    return { ...f, action: old === null ? 'create' : old === f.content ? 'unchanged' : 'update' };
  });
  const session = new Session(o.dryRun);
  // vigil's own directories: 0700 whatever the umask, those that exist included. The directory of
  // the units (or agents) belongs to the service manager: made 0700 when missing, else left alone.
  const own = [loc.config, loc.state, loc.data, loc.logs];
  if (o.platform === 'launchd') own.push(join(loc.config, 'launchd'));
  if (rendered.defaultModel) own.push(dirname(rendered.model));
  if (o.mtls) own.push(loc.pki);
  const dirs = [...own, loc.units];
  if (!o.dryRun) {
    // What install and the programs it runs (make-model, certs) create is private to this user.
    process.umask(0o077);
    for (const d of own) ensureDir(d, PRIVATE_DIR, true);
    ensureDir(loc.units);
    for (const f of files) if (f.action !== 'unchanged') writeFileAtomic(f.path, f.content, { mode: f.mode });
  }
  const inference = [o.node, join(o.root, 'packages', 'inference-server', 'bin', 'inference-server.js')];
  if (rendered.defaultModel && !fileExists(rendered.model)) {
    await session.run([...inference, 'make-model', '--out', rendered.model]);
  }
  if (o.mtls && !fileExists(join(loc.pki, 'server.pem'))) {
    await session.run([...inference, 'certs', '--out', loc.pki]);
  }
  if (o.load) {
    if (o.platform === 'launchd') await launchdLoad(session, o, loc, files);
    else await systemdLoad(session, o, files);
  } else {
    session.note('--no-load: no service-manager command was run');
  }
  return {
    command: 'install',
    platform: o.platform,
    dryRun: o.dryRun,
    locations: loc,
    model: rendered.model,
    modelId: rendered.modelId,
    directories: dirs,
    files: files.map((f) => ({ path: f.path, action: f.action, mode: `0${f.mode.toString(8)}` })),
    commands: session.commands,
    validated,
    notes: session.notes,
    failed: session.failed,
  };
}

export async function uninstall(o: InstallOptions, loc: Locations): Promise<DeployResult> {
  const session = new Session(o.dryRun);
  const services = [...SERVICES].reverse();
  await unload(session, o, services);
  const paths =
    o.platform === 'launchd'
      ? services.map((s) => join(s.fallback ? join(loc.config, 'launchd') : loc.units, `${s.label}.plist`))
      : services.flatMap((s) => [...(s.timer ? [s.timer] : []), s.unit]).map((u) => join(loc.units, u));
  paths.push(join(loc.config, 'guardian.json'), join(loc.config, 'health.json'));
  const removed = paths.filter((p) => fileExists(p));
  if (!o.dryRun) {
    for (const p of removed) removeFile(p);
    if (o.platform === 'launchd') {
      try {
        rmdirSync(join(loc.config, 'launchd'));
      } catch {
        // not empty, or already gone: left as it is
      }
    }
  }
  if (o.platform === 'systemd' && o.load) {
    await session.run(['systemctl', '--user', 'daemon-reload']);
    await session.run(['systemctl', '--user', 'reset-failed', ...services.map((s) => s.unit)], { mayFail: true });
  }
  session.note(
    `kept: data ${loc.data}, state ${loc.state}, logs ${loc.logs} (remove them by hand if you want them gone)`,
  );
  return {
    command: 'uninstall',
    platform: o.platform,
    dryRun: o.dryRun,
    locations: loc,
    files: removed.map((path) => ({ path, action: 'remove' })),
    commands: session.commands,
    notes: session.notes,
    failed: session.failed,
  };
}

const shellWord = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** The result for a person: one line a file, one a command, then the notes. */
export function formatResult(result: DeployResult): string {
  const out: string[] = [];
  const dry = result.dryRun ? ', dry run: nothing was changed' : '';
  out.push(`vigil ${result.command} (${result.platform}${dry})`);
  for (const f of result.files) out.push(`  ${f.action.padEnd(9)} ${f.path}`);
  for (const c of result.commands) {
    const how =
      c.kind === 'check'
        ? 'check'
        : c.kind === 'if-not-loaded'
          ? 'run if not loaded:'
          : result.dryRun
            ? 'run'
            : `rc ${c.rc}`;
    const tail = c.mayFail ? '   (may fail: not loaded)' : c.output ? `   (${c.output})` : '';
    out.push(`  ${how.padEnd(9)} ${c.argv.map(shellWord).join(' ')}${tail}`);
  }
  for (const n of result.notes) out.push(`  note      ${n}`);
  if (result.command === 'install' && !result.dryRun && result.failed === 0) {
    const { config, logs, state, data } = result.locations;
    out.push(`configuration: ${join(config, 'guardian.json')}, ${join(config, 'health.json')}`);
    out.push(`logs: ${logs}   state: ${state}   data: ${data}`);
  }
  if (result.failed > 0) out.push(`${result.failed} command(s) failed`);
  return `${out.join('\n')}\n`;
}

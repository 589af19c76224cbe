/**
 * The service-manager side of `vigil install`: the commands it runs (or, with --dry-run, would
 * run), by argv and never through a shell, and the order launchd agents and systemd units are
 * loaded in.
 */
import { userInfo } from 'node:os';
import { basename, join } from 'node:path';
import { currentUid, fileExists, runCommand, sleep } from '@vigil/shared-types/node';
import { type InstallOptions, LOCK_NAME, type Locations, type ServiceDef } from './options.js';

/** How long one service-manager command (or make-model, certs) may run. */
const COMMAND_TIMEOUT_MS = 120_000;

/** A command install ran or would run. `check`: a question; `if-not-loaded`: dry run of a conditional load. */
export interface CommandRecord {
  readonly argv: string[];
  readonly kind: 'run' | 'check' | 'if-not-loaded';
  readonly mayFail?: true;
  rc?: number;
  output?: string;
}

export interface RunOptions {
  readonly kind?: CommandRecord['kind'];
  /** Its failure is expected and ignored (a bootout of a job that is not loaded). */
  readonly mayFail?: boolean;
  readonly retries?: number;
}

/** A file of the plan, with what install does to it. */
export interface PlannedFile {
  readonly path: string;
  readonly mode: number;
  readonly content: string;
  readonly service?: ServiceDef;
  readonly action: 'create' | 'update' | 'unchanged';
}

export class Session {
  readonly commands: CommandRecord[] = [];
  readonly notes: string[] = [];
  failed = 0;

  constructor(private readonly dryRun: boolean) {}

  /** Runs (or, dry, records) a command; rc null when dry. */
  async run(argv: string[], { kind = 'run', mayFail = false, retries = 0 }: RunOptions = {}): Promise<number | null> {
    const entry: CommandRecord = { argv, kind, ...(mayFail ? { mayFail: true as const } : {}) };
    this.commands.push(entry);
    if (this.dryRun) return null;
    let r = await runCommand(argv, COMMAND_TIMEOUT_MS);
    for (let attempt = 0; r.rc !== 0 && attempt < retries; attempt++) {
      await sleep(500);
      r = await runCommand(argv, COMMAND_TIMEOUT_MS);
    }
    entry.rc = r.rc;
    const output = `${r.stdout}${r.stderr}`.trim() || r.detail;
    if (r.rc !== 0 && output) entry.output = output.split('\n').slice(-3).join(' | ');
    if (entry.rc !== 0 && kind === 'run' && !mayFail) {
      this.failed += 1;
      process.stderr.write(`install: ${argv.join(' ')} failed (rc ${entry.rc}): ${entry.output ?? ''}\n`);
    }
    return entry.rc;
  }

  note(text: string): void {
    this.notes.push(text);
  }
}

export async function launchdLoad(
  session: Session,
  o: InstallOptions,
  loc: Locations,
  files: readonly PlannedFile[],
): Promise<void> {
  const domain = `gui/${currentUid()}`;
  const lock = fileExists(join(loc.state, LOCK_NAME));
  const load = async (f: PlannedFile, s: ServiceDef) => {
    const target = `${domain}/${s.label}`;
    if (f.action !== 'unchanged') {
      // bootout before bootstrap: launchd keeps the old definition of a loaded job otherwise.
      await session.run(['launchctl', 'bootout', target], { mayFail: true });
      await session.run(['launchctl', 'bootstrap', domain, f.path], { retries: 2 });
      return;
    }
    // Unchanged: load it only if it is not loaded (`print` exits non-zero for an unknown job).
    const rc = await session.run(['launchctl', 'print', target], { kind: 'check' });
    if (o.dryRun) {
      await session.run(['launchctl', 'bootstrap', domain, f.path], { kind: 'if-not-loaded' });
    } else if (rc !== 0) {
      await session.run(['launchctl', 'bootstrap', domain, f.path], { retries: 2 });
    }
  };
  for (const f of files) {
    const s = f.service;
    if (!s) continue;
    if (s.primary && lock) {
      session.note(
        `the fallback lock ${join(loc.state, LOCK_NAME)} exists: the primary stays unloaded (guardian restore brings it back)`,
      );
      await session.run(['launchctl', 'bootout', `${domain}/${s.label}`], { mayFail: true });
      continue;
    }
    if (s.fallback) {
      if (lock) await load(f, s);
      else if (f.action === 'update')
        await session.run(['launchctl', 'bootout', `${domain}/${s.label}`], { mayFail: true });
      continue;
    }
    await load(f, s);
  }
}

const unitNames = (files: readonly PlannedFile[], which: (f: PlannedFile) => boolean) =>
  files.filter((f) => f.service && which(f)).map((f) => basename(f.path));

export async function systemdLoad(session: Session, o: InstallOptions, files: readonly PlannedFile[]): Promise<void> {
  const unitFiles = files.filter((f) => f.service);
  if (unitFiles.some((f) => f.action !== 'unchanged')) await session.run(['systemctl', '--user', 'daemon-reload']);
  // Units that ran with an older definition pick up the new one (try-restart: only if running).
  const updated = unitNames(unitFiles, (f) => f.action === 'update');
  if (updated.length > 0) await session.run(['systemctl', '--user', 'try-restart', ...updated]);
  const enable = unitNames(unitFiles, (f) => !f.path.endsWith('vigil-health-check.service'));
  await session.run(['systemctl', '--user', 'enable', '--now', ...enable]);
  if (o.linger) await session.run(['loginctl', 'enable-linger', userInfo().username]);
}

/** The commands that stop and unload every service (the reverse of the start order). */
export async function unload(session: Session, o: InstallOptions, services: readonly ServiceDef[]): Promise<void> {
  if (!o.load) return;
  if (o.platform === 'launchd') {
    for (const s of services) {
      await session.run(['launchctl', 'bootout', `gui/${currentUid()}/${s.label}`], { mayFail: true });
    }
  } else {
    const units = services.flatMap((s) => [...(s.timer ? [s.timer] : []), s.unit]);
    await session.run(['systemctl', '--user', 'disable', '--now', ...units], { mayFail: true });
  }
}

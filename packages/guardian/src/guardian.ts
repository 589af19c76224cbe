/**
 * The shell around the machine: it observes (the lock file, the new lines of the primary's log
 * and of both access logs, probes, the binary), asks `decide` what to do, performs the actions
 * (service manager, lock file, alerts), writes the events and keeps the state file.
 */
import { dirname } from 'node:path';
import { exitCodeFor, jsonLogLine } from '@vigil/shared-types';
import {
  appendFileNoFollow,
  ensureDir,
  fileExists,
  RC_NOT_FOUND,
  removeFile,
  runCommand,
  runServiceAction,
  writeFileAtomic,
} from '@vigil/shared-types/node';
import type { BackendConfig, GuardianConfig } from './config.js';
import { NotConfiguredError, StateFileError } from './errors.js';
import { checkIntegrity, type IntegrityResult } from './integrity.js';
import { endPosition } from './logreader.js';
import {
  type Action,
  type Decision,
  decide,
  type GuardianEvent,
  type MachineConfig,
  machineConfigOf,
  type Observation,
  type Target,
} from './machine.js';
import { alertCounter, MetricsWriter } from './metrics.js';
import { Notifier } from './notify.js';
import { observeTick } from './observe.js';
import { Prober } from './probe.js';
import { freshState, StateFile, type StateFileData } from './state-file.js';
import { alertingFromEvents, clearForeignLock, moveAside } from './state-recovery.js';
import { type StatusReport, statusReport } from './status.js';

export type { StatusReport };

export interface GuardianOptions {
  /** Where event lines go when the configuration has no logFile (default: stdout). */
  readonly out?: (line: string) => void;
  /** The environment of service commands (default: this process's). */
  readonly env?: NodeJS.ProcessEnv;
}

const nowS = () => Date.now() / 1000;

export class Guardian {
  readonly machineConfig: MachineConfig;
  /** The probes (public for the benchmark, which times them). */
  readonly prober: Prober;
  private readonly out: (line: string) => void;
  private readonly env: NodeJS.ProcessEnv;
  private readonly state: StateFile;
  private logDirMade = false;
  private readonly metrics: MetricsWriter;
  private readonly notifier: Notifier;
  /** Counts of what this process did since the state was last saved (merged into the state file). */
  private counts: Record<string, number> = {};
  /** The last probe's outcome: the "last check output" of an alert. */
  private lastProbe: Record<string, unknown> | null = null;

  constructor(
    readonly config: GuardianConfig,
    options: GuardianOptions = {},
  ) {
    this.machineConfig = machineConfigOf(config);
    this.prober = new Prober({
      budgetMs: config.probeBudgetS * 1000,
      prompt: config.probePrompt,
      canaryPrompt: config.canaryPrompt,
      canaryMaxTokens: config.canaryMaxTokens,
      busyCheckMs: config.busyCheckS * 1000,
    });
    this.out = options.out ?? ((line) => process.stdout.write(`${line}\n`));
    this.env = options.env ?? process.env;
    this.state = new StateFile(config.stateFile);
    this.metrics = new MetricsWriter(config);
    this.notifier = new Notifier(config);
  }

  close(): void {
    this.prober.close();
  }

  // ---- the operations -----------------------------------------------------------------------

  /** One tick: observe, decide, act. Returns the exit code when the guardian must stop (2), else null. */
  async tick(signal?: AbortSignal): Promise<number | null> {
    await this.notifier.ping('start');
    let code = 0;
    try {
      const exit = await this.locked(async (data) => this.drive(data, await observeTick(this.config, data), signal));
      code = exit ?? 0;
      return exit;
    } catch (err) {
      code = exitCodeFor(err);
      throw err;
    } finally {
      await this.notifier.ping(code);
    }
  }

  /** The operator's swap-back to the primary. */
  async restore(): Promise<{ code: number; message: string }> {
    return this.locked(async (data) => {
      const { primary } = this.config;
      const argv = primary.standalone ?? (primary.binary ? [primary.binary, '--version'] : null);
      let verified = false;
      let detail: string;
      if (argv === null) {
        detail = 'nothing to verify the primary with: configure primary.standalone (or primary.binary)';
      } else if (primary.binary && !fileExists(primary.binary)) {
        detail = `the primary binary ${primary.binary} does not exist`;
      } else {
        const r = await runCommand(argv, primary.standaloneTimeoutS * 1000, { env: this.env });
        verified = r.rc === 0;
        detail = `${argv.join(' ')} exited with ${r.rc}${r.detail ? `: ${r.detail}` : ''}`;
      }
      const lock = fileExists(this.config.lockFile);
      const code = (await this.drive(data, { type: 'restore', verified, detail, lock })) ?? 0;
      const message = !verified
        ? `restore refused: the primary does not run standalone: ${detail}`
        : code === 0
          ? `restored: ${primary.agent} is the active backend again${lock ? ', fallback stopped, lock file removed' : ''}`
          : 'restored, but some service commands failed (see the log)';
      return { code, message };
    });
  }

  /** The operator clears the alerting state (and the failure count, restart window, root causes). */
  async reset(): Promise<{ code: number; message: string }> {
    return this.locked(async (data) => {
      const was = data.machine.alerting;
      const code = (await this.drive(data, { type: 'reset' })) ?? 0;
      return { code, message: was ? `reset: cleared ${was.reason}` : 'reset: was not alerting; counters cleared' };
    });
  }

  /** Runs the integrity check now; logs its events as a tick would. */
  async checkIntegrity(): Promise<IntegrityResult> {
    const { binary } = this.config.primary;
    if (!binary) throw new NotConfiguredError('primary.binary is not configured: there is nothing to check');
    return this.locked(async (data) => {
      const result = await this.integrity();
      await this.drive(data, { type: 'integrity', ...result });
      return result;
    });
  }

  /** The state as the files say (no lock needed: they are written atomically). */
  status(): StatusReport {
    return statusReport(this.config, this.state.peek());
  }

  // ---- the loop of decisions and actions ----------------------------------------------------

  private async locked<T>(fn: (data: StateFileData) => Promise<T>): Promise<T> {
    const c = this.config;
    const worstTickS = c.probeBudgetS * 3 + c.commandTimeoutS * 3 + c.primary.standaloneTimeoutS + 30;
    const foreign = await clearForeignLock(`${this.state.path}.lock`);
    if (foreign !== null) process.stderr.write(`guardian: took over the state lock: ${foreign}\n`);
    const release = await this.state.lock(worstTickS * 1000, worstTickS * 1000);
    try {
      const data = await this.readState();
      try {
        return await fn(data);
      } finally {
        for (const [k, n] of Object.entries(this.counts)) data.counters[k] = (data.counters[k] ?? 0) + n;
        this.counts = {};
        this.state.save(data);
        this.metrics.write(data, fileExists(this.config.lockFile));
      }
    } finally {
      release();
    }
  }

  /**
   * The state file's state; a damaged one is moved aside and replaced by a fresh state (with the
   * alerting state the event log gives), and a `state_reset` event says what was lost.
   */
  private async readState(): Promise<StateFileData> {
    try {
      return this.state.read();
    } catch (err) {
      if (!(err instanceof StateFileError) || !err.recoverable) throw err;
      const aside = moveAside(this.state.path);
      if (aside === null) throw err;
      const data = freshState();
      const alerting = await alertingFromEvents(this.config.logFile);
      if (alerting) data.machine = { ...data.machine, alerting };
      this.writeEvents(
        [
          {
            event: 'state_reset',
            level: 'error',
            detail:
              `the state file ${err.why}: moved to ${aside}; lost: the failure count, the restart window, ` +
              'the root causes, the cadences and the log read positions (the logs are read from their recent tail again); ' +
              (alerting
                ? `kept from the event log: ${alerting.reason} since ${new Date(alerting.since * 1000).toISOString()}`
                : 'the event log shows no alerting state to keep'),
          },
        ],
        nowS(),
      );
      this.state.save(data);
      return data;
    }
  }

  /** Feeds observations to the machine and performs its actions until it has nothing more to do. */
  private async drive(data: StateFileData, first: Observation, signal?: AbortSignal): Promise<number | null> {
    let observation: Observation | null = first;
    while (observation !== null) {
      const now = nowS();
      const d: Decision = decide(data.machine, observation, this.machineConfig, now);
      data.machine = d.state;
      this.writeEvents(d.events, now);
      // Write-ahead: what the machine decided is on disk before anything it decided is done.
      if (d.actions.some((a) => a.type !== 'probe' && a.type !== 'integrity') || d.exit !== null) this.state.save(data);
      observation = null;
      for (const action of d.actions) {
        if (signal?.aborted && action.type === 'probe') break;
        const seen = await this.perform(action, data, signal);
        if (seen !== null) observation = seen;
      }
      if (d.exit !== null) return d.exit;
      if (signal?.aborted) return null;
    }
    return null;
  }

  private async perform(action: Action, data: StateFileData, signal?: AbortSignal): Promise<Observation | null> {
    const c = this.config;
    switch (action.type) {
      case 'probe': {
        const backend = this.backend(action.target);
        const r = await this.prober.probe(action.probe, backend, signal);
        const { ok, ms, cause, snippet } = r;
        this.lastProbe = { probe: action.probe, target: action.target, ok, ms, cause, snippet, at: r.endedAt };
        // A successful completion of ours leaves one success line in the backend's access log;
        // remember when, so that it is not taken for a client's.
        if (r.ok && (action.probe === 'chat' || action.probe === 'canary')) {
          data.ownProbes = [...data.ownProbes, [r.startedAt, r.endedAt, action.target]];
        }
        return {
          type: 'probe',
          probe: action.probe,
          ok: r.ok,
          ms: r.ms,
          ...(r.cause ? { cause: r.cause } : {}),
          ...(r.snippet !== undefined ? { snippet: r.snippet } : {}),
          ...(r.busy ? { busy: r.busy } : {}),
          ...(r.waitingCpu ? { waitingCpu: true } : {}),
        };
      }
      case 'integrity':
        return { type: 'integrity', ...(await this.integrity()) };
      case 'await_serving': {
        const r = await this.prober.awaitServing(this.backend(action.target), action.graceS * 1000, signal);
        if (r.ok && r.last) data.ownProbes = [...data.ownProbes, [r.last.startedAt, r.last.endedAt, action.target]];
        const s = Math.round(r.ms) / 1000;
        const detail = r.ok
          ? `served after ${s} s`
          : `no completion within the ${action.graceS} s start-up grace (${r.attempts} tries; last: ${r.last?.snippet ?? 'none'})`;
        return { type: 'serving', target: action.target, ok: r.ok, ms: r.ms, detail };
      }
      case 'service': {
        const backend = this.backendOrNull(action.target);
        const r = backend
          ? await runServiceAction(backend.service, action.op, c.commandTimeoutS * 1000, { env: this.env })
          : null;
        // No command for the action: rc 127, as a command that is not found.
        const missing = `no ${action.op} command is configured for the ${action.target} backend`;
        return {
          type: 'service',
          op: action.op,
          target: action.target,
          purpose: action.purpose,
          rc: r?.rc ?? RC_NOT_FOUND,
          detail: r?.argv ? r.detail : missing,
        };
      }
      case 'write_lock': {
        const lock = { ...action.lock, since_iso: new Date(action.lock.since * 1000).toISOString(), pid: process.pid };
        writeFileAtomic(c.lockFile, `${JSON.stringify(lock, null, 2)}\n`, { mode: 0o644 });
        return null;
      }
      case 'remove_lock':
        removeFile(c.lockFile);
        return null;
      case 'skip_primary_log':
        if (c.primary.log) data.logs.primary = await endPosition(c.primary.log);
        data.lastSuccessAt = null;
        return null;
      case 'alert': {
        const sent = await this.notifier.alert({
          event: action.event,
          message: action.message,
          output: this.lastProbe,
        });
        for (const r of sent) this.count(alertCounter(r.channel, r.ok));
        const level = (ok: boolean) => (ok ? 'info' : 'warn');
        const events = sent.map((r) => ({
          event: r.ok ? 'alert_sent' : 'alert_failed',
          level: level(r.ok),
          detail: r.detail,
        }));
        this.writeEvents(events as GuardianEvent[], nowS());
        return null;
      }
    }
  }

  private integrity(): Promise<IntegrityResult> {
    const p = this.config.primary;
    return checkIntegrity(
      { binary: p.binary!, ...(p.manifest ? { manifest: p.manifest } : {}), codesign: p.codesign },
      this.config.commandTimeoutS * 1000,
      this.env,
    );
  }

  private backendOrNull(target: Target): BackendConfig | null {
    return target === 'primary' ? this.config.primary : (this.config.fallback ?? null);
  }

  /** The backend a probe goes to; a lock file without a configured fallback leaves the primary's address. */
  private backend(target: Target): BackendConfig {
    return this.backendOrNull(target) ?? this.config.primary;
  }

  // ---- writing --------------------------------------------------------------------------------

  private count(key: string): void {
    this.counts[key] = (this.counts[key] ?? 0) + 1;
  }

  private writeEvents(events: readonly GuardianEvent[], ts: number): void {
    if (events.length === 0) return;
    for (const e of events) this.count(e.event);
    const lines = events.map((e) => {
      const { event, level, ...fields } = e;
      return jsonLogLine(ts, { level, event, ...fields });
    });
    const file = this.config.logFile;
    if (!file) {
      for (const line of lines) this.out(line);
      return;
    }
    if (!this.logDirMade) {
      ensureDir(dirname(file));
      this.logDirMade = true;
    }
    // One write per batch, appended: a line is never half-written, and a rotated log is followed.
    // Never through a symbolic link (the file's or its directory's).
    appendFileNoFollow(file, `${lines.join('\n')}\n`, 0o640);
  }
}

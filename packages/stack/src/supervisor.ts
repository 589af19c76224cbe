/**
 * The supervisor: starts the services (each in its own process group, its output appended to its
 * log), holds their pids in `run/stack.json`, stops them (SIGTERM, SIGKILL after the stop
 * timeout), answers the control socket, and starts again a service that exits by itself, with the
 * installed units' policy (see restart-policy.ts). What is stopped on purpose (`vigil stop`, the
 * guardian's fallback) stays stopped; the inference primary and its fallback are never both
 * started by it (the guardian's lock file says which one serves). Each service's watchdog (see
 * watchdog.ts) is checked every second: one that expired is killed and restarted as after an
 * exit. Hangs the services cannot see themselves are the guardian's and the health check's: they
 * restart through the control socket.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fchmodSync, fstatSync, openSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { ExitCode, fileExists, PRIVATE_FILE } from '@vigil/shared-types/light';
import type { ControlReply, ControlRequest, ExitInfo, ServiceStatus } from './control.js';
import { type HomePaths, NODE, rel } from './paths.js';
import type { ReadyProbe } from './readiness.js';
import { decideRestart, describeExit, RESTART_POLICY, type RestartPolicy } from './restart-policy.js';
import { isServiceName, SERVICE_NAMES, type ServiceName, type ServiceSpec, STOP_ORDER } from './services.js';
import { writeStackFile } from './stackfile.js';
import { ServiceWatchdog, WATCHDOG_MS, watchdogEnv } from './watchdog.js';

interface Running {
  readonly child: ChildProcess;
  readonly startedAt: number;
  /** The size of its log when it started: what it writes comes after. */
  readonly logStart: number;
  /** Set when the supervisor stops it: its exit is then no news. */
  expected: boolean;
  readonly watchdog: ServiceWatchdog;
}

interface History {
  starts: number;
  lastExit: ExitInfo | null;
  /** Exits in a row, each soon after its start (the backoff's count). */
  failures: number;
  /** A restart waiting for its delay, and when it is due. */
  pending: NodeJS.Timeout | null;
  restartAt: number | null;
  /** It exited with a status a restart cannot fix (2, 78), and was left stopped. */
  failed: boolean;
}

/** How long a service may take to end after SIGTERM before SIGKILL, unless --stop-timeout says. */
export const STOP_TIMEOUT_MS = 10_000;

export interface SupervisorOptions {
  readonly stopTimeoutMs?: number;
  readonly restartPolicy?: RestartPolicy;
  /** The services' watchdog period (WATCHDOG_USEC); 0: none. */
  readonly watchdogMs?: number;
}

/** Sends a signal to a process group; false when none is left. */
function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

export class Supervisor {
  private readonly running = new Map<ServiceName, Running>();
  private readonly history = new Map<ServiceName, History>(
    SERVICE_NAMES.map((n) => [
      n,
      { starts: 0, lastExit: null, failures: 0, pending: null, restartAt: null, failed: false },
    ]),
  );
  private readonly startedAt = new Date().toISOString();
  readonly stopTimeoutMs: number;
  private readonly policy: RestartPolicy;
  readonly watchdogMs: number;
  private watchdogTimer: NodeJS.Timeout | null = null;
  /** Set once the whole stack is stopping: nothing is started any more. */
  stopping = false;

  constructor(
    private readonly specs: Readonly<Record<ServiceName, ServiceSpec>>,
    private readonly paths: HomePaths,
    private readonly say: (line: string) => void,
    options: SupervisorOptions = {},
  ) {
    this.stopTimeoutMs = options.stopTimeoutMs ?? STOP_TIMEOUT_MS;
    this.policy = options.restartPolicy ?? RESTART_POLICY;
    this.watchdogMs = options.watchdogMs ?? WATCHDOG_MS;
  }

  /** Kills (SIGKILL, its group) each service whose watchdog expired; its exit is then restarted. */
  private checkWatchdogs(): void {
    for (const [name, r] of this.running) {
      const why = r.expected ? null : r.watchdog.expired();
      if (why === null || !r.child.pid) continue;
      this.say(`vigil: ${name} (pid ${r.child.pid}) watchdog expired: ${why}; killing it (SIGKILL)`);
      if (!signalGroup(r.child.pid, 'SIGKILL')) r.child.kill('SIGKILL');
    }
  }

  /** The command line recorded for a service (what `ps` shows for it). */
  commandOf(name: ServiceName): string {
    return [NODE, ...this.specs[name].argv].join(' ');
  }

  pidOf(name: ServiceName): number | null {
    return this.running.get(name)?.child.pid ?? null;
  }

  private save(): void {
    const services: Record<string, { pid: number; command: string }> = {};
    for (const [n, r] of this.running) if (r.child.pid) services[n] = { pid: r.child.pid, command: this.commandOf(n) };
    writeStackFile(this.paths.stackFile, {
      pid: process.pid,
      home: this.paths.home,
      stopTimeoutMs: this.stopTimeoutMs,
      services,
    });
  }

  private cancelRestart(h: History): void {
    if (h.pending) clearTimeout(h.pending);
    h.pending = null;
    h.restartAt = null;
  }

  /** Starts a service unless it runs, or the stack is stopping; its pid. */
  start(name: ServiceName): number | null {
    if (this.stopping) return null;
    const h = this.history.get(name)!;
    this.cancelRestart(h);
    const running = this.running.get(name);
    if (running) return running.child.pid ?? null;
    const spec = this.specs[name];
    const fd = openSync(this.paths.log(name), 'a', PRIVATE_FILE);
    fchmodSync(fd, PRIVATE_FILE); // a log made by an older version, or under another umask
    const logStart = fstatSync(fd).size;
    // Its own process group: Ctrl-C reaches this supervisor only, which stops the services in order.
    // Descriptor 3: the pipe its notifications (READY=1, WATCHDOG=1, STATUS=) come back on.
    const child = spawn(NODE, spec.argv, {
      detached: true,
      stdio: ['ignore', fd, fd, 'pipe'],
      env: watchdogEnv(process.env, this.watchdogMs),
    });
    closeSync(fd);
    h.starts += 1;
    h.failed = false;
    const watchdog = new ServiceWatchdog(this.watchdogMs, child.stdio[3] as Readable | null);
    const r: Running = { child, startedAt: Date.now(), logStart, expected: false, watchdog };
    if (this.watchdogMs > 0 && this.watchdogTimer === null) {
      this.watchdogTimer = setInterval(() => this.checkWatchdogs(), 1000);
      this.watchdogTimer.unref();
    }
    this.running.set(name, r);
    child.on('error', (err) => this.say(`vigil: ${name} could not start: ${err.message}`));
    child.on('exit', (code, signal) => {
      // What it started and left behind in its group goes with it (systemd's KillMode=mixed).
      if (child.pid) signalGroup(child.pid, 'SIGKILL');
      if (this.running.get(name)?.child === child) this.running.delete(name);
      h.lastExit = { code, signal, at: new Date().toISOString() };
      this.save();
      if (!this.stopping && !r.expected) this.ended(name, { code, signal }, Date.now() - r.startedAt);
    });
    this.save();
    return child.pid ?? null;
  }

  /** A service ended by itself: one line, and a restart after the policy's delay (not after 2 or 78). */
  private ended(name: ServiceName, exit: { code: number | null; signal: string | null }, upMs: number): void {
    const h = this.history.get(name)!;
    const decision = decideRestart(exit, upMs, h.failures, this.policy);
    if (!decision.restart) {
      h.failures = 0;
      h.failed = true;
      const log = rel(this.paths.log(name));
      const vigil = `node packages/stack/bin/vigil.js --home ${rel(this.paths.home)}`;
      if (name === 'guardian' && exit.code === ExitCode.MANUAL) {
        this.say(
          `vigil: the guardian stopped: manual intervention required (exit 2). See ${log}; then\n` +
            `       node packages/guardian/bin/guardian.js reset --config ${rel(this.paths.guardianConfig)}   (or restore)\n` +
            `       ${vigil} start guardian`,
        );
      } else {
        this.say(
          `vigil: ${name} exited (${describeExit(exit)}); not restarted: ${decision.reason}. See ${log}; then ${vigil} start ${name}`,
        );
      }
      return;
    }
    h.failures = decision.attempt;
    h.restartAt = Date.now() + decision.delayMs;
    this.say(
      `vigil: ${name} exited (${describeExit(exit)}); restarting in ${decision.delayMs / 1000} s (restart ${decision.attempt})`,
    );
    h.pending = setTimeout(() => {
      h.pending = null;
      h.restartAt = null;
      this.restartAfterExit(name);
    }, decision.delayMs);
  }

  /** Why a service that exited must not be started again now (the other inference backend serves); null: it may. */
  private heldBack(name: ServiceName): string | null {
    if (name !== 'inference-server' && name !== 'inference-fallback') return null;
    const lock = fileExists(this.paths.fallbackLock);
    const other: ServiceName = name === 'inference-server' ? 'inference-fallback' : 'inference-server';
    if (this.running.has(other)) return `${other} runs`;
    if (name === 'inference-server' && lock) return `the fallback lock ${rel(this.paths.fallbackLock)} is present`;
    if (name === 'inference-fallback' && !lock) return 'the fallback lock is gone (the primary serves)';
    return null;
  }

  private restartAfterExit(name: ServiceName): void {
    if (this.stopping || this.running.has(name)) return;
    const why = this.heldBack(name);
    if (why) {
      this.history.get(name)!.failures = 0;
      this.say(`vigil: ${name} not restarted: ${why}; the guardian decides which inference backend serves`);
      return;
    }
    this.start(name);
  }

  /**
   * SIGTERM (and SIGCONT, so that a stopped process can act on it), then SIGKILL to its process
   * group after the stop timeout; resolves once the process is gone. Cancels a pending restart.
   */
  async stop(name: ServiceName, timeoutMs = this.stopTimeoutMs): Promise<void> {
    const h = this.history.get(name)!;
    this.cancelRestart(h);
    h.failures = 0;
    const r = this.running.get(name);
    if (!r) return;
    r.expected = true;
    const { child } = r;
    const gone = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill('SIGTERM');
    child.kill('SIGCONT');
    const t = setTimeout(() => {
      this.say(
        `vigil: ${name} (pid ${child.pid}) did not end within ${timeoutMs / 1000} s of SIGTERM; killing it (SIGKILL)`,
      );
      if (!child.pid || !signalGroup(child.pid, 'SIGKILL')) child.kill('SIGKILL');
    }, timeoutMs);
    await gone;
    clearTimeout(t);
    if (this.running.get(name) === r) this.running.delete(name);
    this.save();
  }

  /** Stops every service, in order (see STOP_ORDER). */
  async stopAll(): Promise<void> {
    this.stopping = true;
    if (this.watchdogTimer) clearInterval(this.watchdogTimer);
    this.watchdogTimer = null;
    for (const h of this.history.values()) this.cancelRestart(h);
    for (const name of STOP_ORDER) await this.stop(name);
  }

  /** What the readiness check of a running service needs; null when it does not run. */
  readyProbe(name: ServiceName): ReadyProbe | null {
    const r = this.running.get(name);
    return r ? { ready: this.specs[name].ready, log: this.paths.log(name), logStart: r.logStart } : null;
  }

  status(): ServiceStatus[] {
    return SERVICE_NAMES.map((name) => {
      const r = this.running.get(name);
      const h = this.history.get(name)!;
      return {
        name,
        state: r ? 'running' : h.pending ? 'restarting' : h.failed ? 'failed' : 'stopped',
        pid: r?.child.pid ?? null,
        startedAt: r ? new Date(r.startedAt).toISOString() : null,
        starts: h.starts,
        restarts: Math.max(0, h.starts - 1),
        restartAt: h.restartAt === null ? null : new Date(h.restartAt).toISOString(),
        lastExit: h.lastExit,
      };
    });
  }

  /** Answers a control request (`shutdown` is the caller's: it ends this process). */
  async handle(request: ControlRequest): Promise<ControlReply> {
    const { action } = request;
    if (action === 'status') {
      const daemonReady = this.specs['signal-daemon'].ready;
      return {
        ok: true,
        services: this.status(),
        supervisor: { pid: process.pid, home: this.paths.home, startedAt: this.startedAt },
        ...(daemonReady.kind === 'http' ? { daemonHttp: daemonReady.addr } : {}),
      };
    }
    if (action !== 'start' && action !== 'stop' && action !== 'restart') {
      return { ok: false, error: `unknown action "${String(action)}" (status, start, stop, restart)` };
    }
    const { service } = request;
    if (!isServiceName(service)) {
      return { ok: false, error: `unknown service "${service}" (known: ${SERVICE_NAMES.join(', ')})` };
    }
    if (this.stopping) return { ok: false, error: 'the stack is stopping' };
    if (action === 'start') return { ok: true, pid: this.start(service) ?? undefined };
    await this.stop(service);
    if (action === 'stop') return { ok: true };
    // restart: the old process has ended; the new one is started (not yet ready), as `launchctl kickstart -k`.
    return { ok: true, pid: this.start(service) ?? undefined };
  }
}

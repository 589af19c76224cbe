/**
 * The supervisor: starts the services (each in its own process group, its output appended to its
 * log), holds their pids in `run/stack.json`, stops them (SIGTERM, SIGKILL after the grace), and
 * answers the control socket. It does not restart the inference server or the daemon by itself:
 * that is the guardian's job and the health check's. The guardian is started again after a crash,
 * but not after exit 2 (an operator must act).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync } from 'node:fs';
import { ExitCode } from '@vigil/shared-types';
import type { ControlReply, ControlRequest, ExitInfo, ServiceStatus } from './control.js';
import { type HomePaths, NODE, rel } from './paths.js';
import type { ReadyProbe } from './readiness.js';
import { isServiceName, SERVICE_NAMES, type ServiceName, type ServiceSpec, STOP_ORDER } from './services.js';
import { writeStackFile } from './stackfile.js';

interface Running {
  readonly child: ChildProcess;
  readonly startedAt: number;
  /** The size of its log when it started: what it writes comes after. */
  readonly logStart: number;
  /** Set when the supervisor stops it: its exit is then no news. */
  expected: boolean;
}

interface History {
  starts: number;
  lastExit: ExitInfo | null;
}

/** How long a service may take to stop after SIGTERM before SIGKILL. */
export const STOP_GRACE_MS = 15_000;

export class Supervisor {
  private readonly running = new Map<ServiceName, Running>();
  private readonly history = new Map<ServiceName, History>(
    SERVICE_NAMES.map((n) => [n, { starts: 0, lastExit: null }]),
  );
  private readonly startedAt = new Date().toISOString();
  /** Set once the whole stack is stopping: nothing is started any more. */
  stopping = false;

  constructor(
    private readonly specs: Readonly<Record<ServiceName, ServiceSpec>>,
    private readonly paths: HomePaths,
    private readonly say: (line: string) => void,
  ) {}

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
    writeStackFile(this.paths.stackFile, { pid: process.pid, home: this.paths.home, services });
  }

  /** Starts a service unless it runs, or the stack is stopping; its pid. */
  start(name: ServiceName): number | null {
    if (this.stopping) return null;
    const running = this.running.get(name);
    if (running) return running.child.pid ?? null;
    const spec = this.specs[name];
    const log = this.paths.log(name);
    const fd = openSync(log, 'a', 0o600);
    const logStart = fstatSync(fd).size;
    // Its own process group: Ctrl-C reaches this supervisor only, which stops the services in order.
    const child = spawn(NODE, spec.argv, { detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const h = this.history.get(name)!;
    h.starts += 1;
    const r: Running = { child, startedAt: Date.now(), logStart, expected: false };
    this.running.set(name, r);
    child.on('error', (err) => this.say(`vigil: ${name} could not start: ${err.message}`));
    child.on('exit', (code, signal) => {
      if (this.running.get(name)?.child === child) this.running.delete(name);
      h.lastExit = { code, signal, at: new Date().toISOString() };
      this.save();
      if (!this.stopping && !r.expected) this.ended(name, code, signal);
    });
    this.save();
    return child.pid ?? null;
  }

  /** A service ended by itself: say so; the guardian is started again (not after exit 2). */
  private ended(name: ServiceName, code: number | null, signal: NodeJS.Signals | null): void {
    const how = signal ? `killed by ${signal}` : `exit ${code}`;
    const guardianLog = rel(this.paths.log('guardian'));
    if (name === 'guardian' && code === ExitCode.MANUAL) {
      this.say(
        `vigil: the guardian stopped: manual intervention required (exit 2). See ${guardianLog}; then\n` +
          `       node packages/guardian/bin/guardian.js reset --config ${rel(this.paths.guardianConfig)}   (or restore)\n` +
          `       node packages/stack/bin/vigil.js --home ${rel(this.paths.home)} start guardian`,
      );
    } else if (name === 'guardian') {
      const starts = this.history.get(name)!.starts;
      const wait = Math.min(60_000, 1000 * 2 ** Math.min(starts, 6));
      this.say(`vigil: the guardian ended (${how}); starting it again in ${wait / 1000} s`);
      setTimeout(() => !this.stopping && !this.running.has('guardian') && this.start('guardian'), wait).unref();
    } else {
      this.say(`vigil: ${name} ended (${how}); ${this.specs[name].restartedBy} brings it back`);
    }
  }

  /** SIGTERM, then SIGKILL after the grace; resolves once the process is gone. */
  async stop(name: ServiceName, graceMs = STOP_GRACE_MS): Promise<void> {
    const r = this.running.get(name);
    if (!r) return;
    r.expected = true;
    const { child } = r;
    const gone = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await gone;
    clearTimeout(t);
    if (this.running.get(name) === r) this.running.delete(name);
    this.save();
  }

  /** Stops every service, in order (see STOP_ORDER). */
  async stopAll(): Promise<void> {
    this.stopping = true;
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
        state: r ? 'running' : 'stopped',
        pid: r?.child.pid ?? null,
        startedAt: r ? new Date(r.startedAt).toISOString() : null,
        starts: h.starts,
        restarts: Math.max(0, h.starts - 1),
        lastExit: h.lastExit,
      };
    });
  }

  /** Answers a control request (`shutdown` is the caller's: it ends this process). */
  async handle(request: ControlRequest): Promise<ControlReply> {
    const { action } = request;
    if (action === 'status') {
      return {
        ok: true,
        services: this.status(),
        supervisor: { pid: process.pid, home: this.paths.home, startedAt: this.startedAt },
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

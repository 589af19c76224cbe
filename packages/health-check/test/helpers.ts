/** Test helpers: a lab of real processes (daemon, relay, gateway stand-in) in a directory of its own. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HealthReport } from '@vigil/shared-types';
import { findProcesses, killAll } from '@vigil/shared-types/node';
import { rpc, spawnDaemon, tmpDir } from '../../signal-daemon/test/helpers.js';

export { rpc };

export const HC_BIN = fileURLToPath(new URL('../bin/health-check.js', import.meta.url));
export const DAEMON_BIN = fileURLToPath(new URL('../../signal-daemon/bin/signal-daemon.js', import.meta.url));
export const RELAY_BIN = fileURLToPath(new URL('../../tcp-relay/bin/tcp-relay.js', import.meta.url));
export const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
export const NODE = process.execPath;
export const ACCOUNT = '+15550000001';

import { freePort, until } from '../../../test/support.js';

export { freePort, until };

export interface HealthRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built health-check binary; never rejects. */
export function healthCheck(args: string[], env: NodeJS.ProcessEnv = {}): Promise<HealthRun> {
  return new Promise((resolve) => {
    execFile(NODE, [HC_BIN, ...args], { env: { ...process.env, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: unknown }).code as number | null) : 0;
      resolve({ code: typeof code === 'number' ? code : null, stdout, stderr });
    });
  });
}

/** Waits for the first line of a child's stdout that contains `text`. */
export function waitOutput(child: ChildProcess, text: string, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`no "${text}" within ${timeoutMs} ms:\n${out}`)), timeoutMs);
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (s: string) => {
      out += s;
      if (out.includes(text)) {
        clearTimeout(t);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`exited with ${code} before "${text}":\n${out}`));
    });
  });
}

/**
 * Real processes in a directory of their own: a daemon on a fixed free port (so that a relaunch
 * finds it again), and whatever a test adds. Every process whose command line names the
 * directory is killed on cleanup, relaunched ones included.
 */
export class Lab {
  readonly root: string;
  private readonly rm: () => void;
  readonly children: ChildProcess[] = [];
  httpPort = 0;
  tcpPort = 0;

  constructor() {
    const t = tmpDir('vigil-health-');
    this.root = t.dir;
    this.rm = t.cleanup;
  }

  static async create(): Promise<Lab> {
    const lab = new Lab();
    lab.httpPort = await freePort();
    lab.tcpPort = await freePort();
    return lab;
  }

  path(name: string): string {
    return join(this.root, name);
  }

  /** The daemon's argv; `instance` gives a second daemon its own data directory and ports. */
  daemonArgv(
    instance = 'a',
    ports: { http: number; tcp: number } = { http: this.httpPort, tcp: this.tcpPort },
  ): string[] {
    return [
      NODE,
      DAEMON_BIN,
      '--account',
      ACCOUNT,
      '--http',
      `127.0.0.1:${ports.http}`,
      '--tcp',
      ports.tcp === 0 ? 'off' : `127.0.0.1:${ports.tcp}`,
      '--data-dir',
      this.path(`daemon-${instance}`),
      '--localnet',
      this.path('localnet.db'),
    ];
  }

  /** The substrings that pick out this lab's daemons (and no other test's). */
  get processMatch(): string[] {
    return [this.path('localnet.db')];
  }

  /**
   * Starts a daemon of this lab. `account` replaces the `--account ACCOUNT` words (e.g.
   * `['--account=+1…']`, or `[]` with the account in `env` as SIGNAL_DAEMON_ACCOUNT).
   */
  async startDaemon(
    instance = 'a',
    ports?: { http: number; tcp: number },
    opts: { account?: string[]; env?: NodeJS.ProcessEnv } = {},
  ): Promise<ChildProcess> {
    const [, , ...args] = this.daemonArgv(instance, ports);
    if (opts.account) args.splice(0, 2, ...opts.account);
    const d = await spawnDaemon(args, opts.env);
    this.children.push(d.child);
    return d.child;
  }

  /** Starts a fixture or binary as a child, waiting for a line on its stdout. */
  async spawn(argv: string[], ready: string): Promise<ChildProcess> {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    this.children.push(child);
    await waitOutput(child, ready);
    return child;
  }

  /** The relay, listening on 127.0.0.2 (the link address of the tests), forwarding to the daemon. */
  async startRelay(port: number): Promise<ChildProcess> {
    return this.spawn(
      [
        NODE,
        RELAY_BIN,
        '--listen',
        `127.0.0.2:${port}`,
        '--target',
        `127.0.0.1:${this.tcpPort}`,
        '--watch-interval',
        '0.1',
      ],
      '"msg":"listening"',
    );
  }

  gatewayArgv(port: number, extra: string[] = []): string[] {
    return [
      NODE,
      fixture('gateway.mjs'),
      '--listen',
      `127.0.0.1:${port}`,
      '--daemon',
      `127.0.0.1:${this.httpPort}`,
      '--log',
      this.path('gateway.log'),
      ...extra,
    ];
  }

  /** A `command` service manager whose restart starts argv detached (as a supervisor would). */
  launcher(argv: string[], log = this.path('launched.log')): { kind: 'command'; restart: string[] } {
    return { kind: 'command', restart: [NODE, fixture('launch.mjs'), log, '--', ...argv] };
  }

  /** A `command` service manager that only records its calls (in FILE) and exits with rc. */
  recorder(file: string, rc = 0): { kind: 'command'; restart: string[]; stop: string[]; start: string[] } {
    const at = (action: string) => [NODE, fixture('record.mjs'), file, String(rc), action];
    return { kind: 'command', restart: at('restart'), stop: at('stop'), start: at('start') };
  }

  writeConfig(config: unknown, name = 'health.json'): string {
    const file = this.path(name);
    writeFileSync(file, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
    return file;
  }

  /** The config every test starts from: this lab's daemon, its own health log and lock, short timeouts. */
  baseConfig(): Record<string, any> {
    return {
      daemon: {
        http: `127.0.0.1:${this.httpPort}`,
        processMatch: this.processMatch,
        relaunchLog: this.path('relaunch.log'),
      },
      retiredPorts: [],
      healthLog: this.path('state/health.log'),
      timeouts: { checkMs: 1000, fixMs: 8000 },
    };
  }

  reports(): (HealthReport & Record<string, any>)[] {
    try {
      return readFileSync(this.path('state/health.log'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    } catch {
      return [];
    }
  }

  async daemonPids(): Promise<number[]> {
    return (await findProcesses({ program: 'signal-daemon', match: this.processMatch })).map((p) => p.pid);
  }

  async cleanup(): Promise<void> {
    for (const c of this.children) c.kill('SIGKILL');
    await killAll(
      (await findProcesses({ match: [this.root] })).map((p) => p.pid),
      500,
    );
    this.rm();
  }
}

export function mkdirp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  return dir;
}

export const statusOf = (report: HealthReport) => Object.fromEntries(report.checks.map((c) => [c.name, c.status]));

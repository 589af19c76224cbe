/** Test helpers: the built guardian as a real process, the fault server, configurations, logs. */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from '@jest/globals';
import {
  GUARDIAN_EVENT_FIELDS,
  GUARDIAN_EVENT_LEVEL,
  GUARDIAN_EXTRA_EVENT_FIELDS,
  GUARDIAN_EXTRA_EVENT_LEVEL,
} from '@vigil/shared-types';
import { exited } from '../../../test/support.js';

export { exited };

export const BIN = fileURLToPath(new URL('../bin/guardian.js', import.meta.url));
export const FIXTURES = fileURLToPath(new URL('./fixtures/', import.meta.url));
export const FAULT_SERVER = join(FIXTURES, 'fault-server.mjs');
export const SERVICE = join(FIXTURES, 'service.mjs');
export const NODE = process.execPath;

export const run = promisify(execFile);

/** Runs a Node script to completion (a non-zero exit rejects). */
export const runNode = (args: string[]) => run(NODE, args);

export function tmpDir(prefix = 'vigil-guardian-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export { freePort } from '../../../test/support.js';

export function writeJson(file: string, value: unknown): string {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
  return file;
}

/** Runs the guardian CLI to completion. */
export async function guardian(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeout = 20_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(NODE, [BIN, ...args], { env: { ...process.env, ...env }, timeout });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** The guardian as a long-running process (`run`). */
export function spawnGuardian(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess & { output: () => string } {
  const child = spawn(NODE, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stdout!.on('data', (s: string) => {
    out += s;
  });
  child.stderr!.on('data', (s: string) => {
    out += s;
  });
  return Object.assign(child, { output: () => out });
}

export function readLines(file: string): Record<string, any>[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}

/** Polls until `check` returns a value (not undefined/false), at most `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** The events of a guardian log, waiting until one named `name` (the `n`th) is there. */
export function waitEvent(log: string, name: string, n = 1, timeoutMs = 15_000): Promise<Record<string, any>[]> {
  return waitFor(
    `${n} × ${name} in ${log}`,
    () => {
      const events = readLines(log);
      return events.filter((e) => e.event === name).length >= n ? events : undefined;
    },
    timeoutMs,
  ).catch((err: Error) => {
    // What the guardian did instead, for the reader of a failed run.
    const seen = readLines(log).map((e) => `${e.ts} ${e.event}${e.reason ? ` (${e.reason})` : ''}`);
    throw new Error(`${err.message}; the log's last events:\n${seen.slice(-20).join('\n')}`);
  });
}

export interface FaultServer {
  readonly child: ChildProcess;
  readonly port: number;
  readonly modeFile: string;
  readonly requests: string;
  setMode(mode: string): void;
  /** The requests it received, in order. */
  received(): { method: string; path: string; body: string }[];
  stop(): Promise<void>;
}

/** The argv of a fault server for `name` in `dir`: its mode file and request record are named after it. */
export function faultArgv(dir: string, name: string, port: number, extra: string[] = []): string[] {
  const files = ['--mode-file', join(dir, `${name}.mode`), '--requests', join(dir, `${name}.requests`)];
  return [NODE, FAULT_SERVER, '--port', String(port), ...files, ...extra];
}

/** The fault server as a child process (its mode is a file, so it survives restarts too). */
export async function startFault(dir: string, name = 'fault', extra: string[] = [], port = 0): Promise<FaultServer> {
  const modeFile = join(dir, `${name}.mode`);
  const requests = join(dir, `${name}.requests`);
  const [node, ...args] = faultArgv(dir, name, port, extra);
  const child = spawn(node!, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (s: string) => {
    out += s;
  });
  const bound = await waitFor(`${name} to listen`, () => {
    const line = out.split('\n')[0];
    return line && out.includes('\n') ? (JSON.parse(line) as { port: number }).port : undefined;
  });
  return {
    child,
    port: bound,
    modeFile,
    requests,
    setMode: (mode) => writeFileSync(modeFile, mode),
    received: () => readLines(requests) as any,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited(child);
      }
    },
  };
}

/** The argv of the `command` manager that drives service.mjs for backend `name`. */
export function serviceCommands(dir: string, name: string, argv: string[], waitUrl?: string) {
  const base = (op: string) => [
    NODE,
    SERVICE,
    op,
    '--dir',
    dir,
    '--name',
    name,
    ...(waitUrl ? ['--wait-url', waitUrl] : []),
    '--',
    ...argv,
  ];
  return { kind: 'command', restart: base('restart'), stop: base('stop'), start: base('start') };
}

/** The operations service.mjs recorded for backend `name`. */
export function serviceCalls(dir: string, name: string): string[] {
  return readLines(join(dir, `${name}.calls`)).map((c) => c.op);
}

/** Kills what service.mjs started for backend `name`, if it runs. */
export function killService(dir: string, name: string): void {
  try {
    const pid = Number(readFileSync(join(dir, `${name}.pid`), 'utf8'));
    if (pid > 0) process.kill(pid, 'SIGKILL');
  } catch {
    // not running
  }
}

/**
 * A directory of recording stand-ins (launchctl, systemctl, codesign) and the environment that
 * puts it first on PATH for the spawned guardian. Node's directory comes next, for the shebang.
 */
export function standins(
  dir: string,
  rc: Record<string, number> = {},
): { env: NodeJS.ProcessEnv; calls: () => { name: string; argv: string[] }[] } {
  const bin = join(dir, 'standin-bin');
  mkdirSync(bin, { recursive: true });
  for (const name of ['launchctl', 'systemctl', 'codesign']) {
    copyFileSync(join(FIXTURES, 'standin.mjs'), join(bin, name));
    chmodSync(join(bin, name), 0o755);
  }
  const record = join(dir, 'standin.calls');
  const env: NodeJS.ProcessEnv = {
    PATH: [bin, dirname(NODE), process.env.PATH ?? ''].join(delimiter),
    STANDIN_RECORD: record,
  };
  for (const [name, code] of Object.entries(rc)) env[`STANDIN_RC_${name.toUpperCase()}`] = String(code);
  return { env, calls: () => readLines(record) as any };
}

/** A minimal valid configuration around one backend address, with fast timings; `over` replaces keys. */
export function baseConfig(dir: string, port: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    intervalS: 0.2,
    probeBudgetS: 1,
    modelListIntervalS: 0,
    canaryIntervalS: 0,
    integrityIntervalS: 0,
    commandTimeoutS: 10,
    stateFile: join(dir, 'state.json'),
    lockFile: join(dir, 'fallback.lock'),
    logFile: join(dir, 'guardian.log'),
    ...over,
    primary: {
      agent: 'inference-primary',
      http: `127.0.0.1:${port}`,
      model: 'tiny',
      service: { kind: 'command', restart: [NODE, '-e', 'process.exit(0)'] },
      ...((over.primary as object) ?? {}),
    },
  };
}

const FIELDS: Record<string, readonly string[]> = { ...GUARDIAN_EVENT_FIELDS, ...GUARDIAN_EXTRA_EVENT_FIELDS };
const LEVELS: Record<string, string> = { ...GUARDIAN_EVENT_LEVEL, ...GUARDIAN_EXTRA_EVENT_LEVEL };

/**
 * Checks every line of a guardian log against the contract (spec 2.5): ts in Unix seconds (with
 * a fraction); the event's level; exactly its fields, of their types. Returns the events written
 * since `since`.
 */
export function checkedEvents(log: string, since: number): Record<string, any>[] {
  const events = readLines(log);
  const now = Date.now() / 1000 + 1;
  for (const e of events) {
    const { ts, level, event, ...fields } = e;
    expect(Object.keys(e).slice(0, 3)).toEqual(['ts', 'level', 'event']);
    expect(typeof ts).toBe('number');
    expect(ts).toBeGreaterThan(1.7e9);
    expect(ts).toBeLessThanOrEqual(now);
    expect(level).toBe(LEVELS[event]);
    expect(Object.keys(fields).sort()).toEqual([...(FIELDS[event] ?? [`unknown event ${event}`])].sort());
    for (const [k, v] of Object.entries(fields)) {
      if (k === 'probe_ms' || k === 'consecutive' || k === 'rc') expect(Number.isInteger(v)).toBe(true);
      else if (k === 'recent_success_age_s') expect(typeof v).toBe('number');
      else expect(typeof v).toBe('string');
    }
  }
  return events.filter((e) => e.ts >= since - 0.005);
}

export const nowS = () => Date.now() / 1000;

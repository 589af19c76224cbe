/** What the checks observe and do: sockets, HTTP, processes, commands, files. Each bounded in time. */
import { execFile, spawn } from 'node:child_process';
import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  renameSync,
  statSync,
  writeSync,
} from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { basename, dirname } from 'node:path';
import {
  DAEMON_PATHS,
  type DaemonStatus,
  type HostPort,
  type ServiceAction,
  type ServiceManagerConfig,
  serviceArgv,
} from '@vigil/shared-types';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** True when a TCP connection to the address is accepted within the timeout. */
export function tcpAccepts(addr: HostPort, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: addr.host, port: addr.port });
    const done = (ok: boolean) => {
      clearTimeout(t);
      s.destroy();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** One HTTP request with a deadline; the body as text. Rejects on any failure. */
export function httpRequest(
  addr: HostPort,
  opts: { method: string; path: string; headers?: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: addr.host, port: addr.port, method: opts.method, path: opts.path, headers: opts.headers, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (body.length < 1 << 20) body += d;
        });
        res.on('end', () => {
          clearTimeout(t);
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    const t = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
    req.end(opts.body);
  });
}

/** A JSON-RPC call over the daemon's HTTP transport: the result, or an Error saying why not. */
export async function rpcCall(addr: HostPort, method: string, params: unknown, timeoutMs: number): Promise<unknown> {
  const r = await httpRequest(
    addr,
    {
      method: 'POST',
      path: DAEMON_PATHS.rpc,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method, params, id: 1 }),
    },
    timeoutMs,
  );
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  const reply = JSON.parse(r.body) as { result?: unknown; error?: { code: number; message: string } };
  if (reply.error) throw new Error(`error ${reply.error.code}: ${reply.error.message}`);
  return reply.result;
}

export async function daemonStatus(addr: HostPort, timeoutMs: number): Promise<DaemonStatus | null> {
  try {
    const r = await httpRequest(
      addr,
      { method: 'GET', path: DAEMON_PATHS.check, headers: { accept: 'application/json' } },
      timeoutMs,
    );
    return r.status === 200 || r.status === 503 ? (JSON.parse(r.body) as DaemonStatus) : null;
  } catch {
    return null;
  }
}

// ---- processes ------------------------------------------------------------------------------

export interface ProcessInfo {
  readonly pid: number;
  /** The command line's words (from /proc exactly; from `ps` split at spaces). */
  readonly argv: readonly string[];
  readonly command: string;
}

/** Every process with its command line: /proc on Linux, `ps` elsewhere (macOS). */
export async function listProcesses(): Promise<ProcessInfo[]> {
  if (process.platform === 'linux') {
    const out: ProcessInfo[] = [];
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').filter(Boolean);
        if (argv.length > 0) out.push({ pid: Number(name), argv, command: argv.join(' ') });
      } catch {
        // gone meanwhile
      }
    }
    return out;
  }
  const { stdout } = await run(['ps', '-axww', '-o', 'pid=,command='], 5000);
  return stdout
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ pid: Number(m[1]), argv: m[2]!.split(/\s+/), command: m[2]! }));
}

const INTERPRETER = /^(node|nodejs|node\d+|bun|deno|tsx)$/;
const stem = (path: string) => basename(path).replace(/\.(c|m)?js$/, '');

/**
 * True when the process runs the program `name`: its executable is `name`, or an interpreter
 * (node…) runs a script called `name` or `name.js` (flags before the script are skipped).
 * An editor or `tail -f name.log` is not the program.
 */
export function runsProgram(argv: readonly string[], name: string): boolean {
  if (argv.length === 0) return false;
  if (stem(argv[0]!) === name) return true;
  if (!INTERPRETER.test(basename(argv[0]!))) return false;
  const script = argv.slice(1).find((a) => !a.startsWith('-'));
  return script !== undefined && stem(script) === name;
}

/**
 * The processes (never this one) that run `program` (when given) and whose command line
 * contains every one of the substrings.
 */
export async function findProcesses(select: { program?: string; match?: readonly string[] }): Promise<ProcessInfo[]> {
  return (await listProcesses()).filter(
    (p) =>
      p.pid !== process.pid &&
      (select.program === undefined || runsProgram(p.argv, select.program)) &&
      (select.match ?? []).every((m) => p.command.includes(m)),
  );
}

/** Socket inodes in a LISTEN (0A) or ESTABLISHED (01) state on a local or remote port (Linux). */
function procNetInodes(port: number, state: '0A' | '01', side: 'local' | 'remote'): Set<string> {
  const inodes = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== state) continue;
      const addr = side === 'local' ? f[1] : f[2];
      if (Number.parseInt(addr?.split(':')[1] ?? '', 16) === port) inodes.add(f[9]!);
    }
  }
  return inodes;
}

function pidsOwning(inodes: Set<string>): number[] {
  if (inodes.size === 0) return [];
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${name}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${name}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) {
          pids.push(Number(name));
          break;
        }
      } catch {
        // closed meanwhile
      }
    }
  }
  return pids;
}

/** The processes listening on a TCP port, found by port (not by name). */
export async function listenersOn(port: number): Promise<number[]> {
  if (process.platform === 'linux') return pidsOwning(procNetInodes(port, '0A', 'local'));
  const { stdout } = await run(['lsof', '-nP', `-iTCP:${port}`, '-sTCP:LISTEN', '-t'], 5000);
  return stdout.split('\n').filter(Boolean).map(Number);
}

/** How many established TCP connections have this port as their remote end (consumers of a listener). */
export async function establishedTo(port: number): Promise<number> {
  if (process.platform === 'linux') return procNetInodes(port, '01', 'remote').size;
  const { stdout } = await run(['lsof', '-nP', `-iTCP:${port}`, '-sTCP:ESTABLISHED'], 5000);
  return stdout.split('\n').filter((l) => l.includes(`->`) && new RegExp(`->[^ ]*:${port}\\b`).test(l)).length;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** SIGTERM, then SIGKILL for those still alive after the grace. True when all are gone. */
export async function killAll(pids: readonly number[], graceMs = 3000): Promise<boolean> {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + graceMs;
  while (pids.some(alive) && Date.now() < deadline) await sleep(25);
  for (const pid of pids.filter(alive)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  await sleep(50);
  return !pids.some(alive);
}

// ---- commands ----------------------------------------------------------------------------------

/** Runs an argv without a shell, with a timeout. rc is the exit status (-1: could not run / killed). */
export function run(
  argv: readonly string[],
  timeoutMs: number,
): Promise<{ rc: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      argv[0]!,
      argv.slice(1),
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        const code = err
          ? typeof (err as { code?: unknown }).code === 'number'
            ? ((err as { code: number }).code as number)
            : -1
          : 0;
        resolve({
          rc: code,
          stdout: String(stdout),
          stderr: err && code === -1 ? `${stderr}${err.message}` : String(stderr),
        });
      },
    );
  });
}

export async function serviceAction(
  manager: ServiceManagerConfig,
  action: ServiceAction,
  timeoutMs: number,
): Promise<{ rc: number; argv: string[] | null; output: string }> {
  const argv = serviceArgv(manager, action, process.getuid?.() ?? 501);
  if (!argv) return { rc: -1, argv: null, output: `no ${action} command configured` };
  const r = await run(argv, timeoutMs);
  return { rc: r.rc, argv, output: `${r.stdout}${r.stderr}`.trim().slice(-300) };
}

/**
 * Starts a program detached from this process (it outlives the check), output appended to a log.
 * Resolves once it has started, or with the reason it could not (a missing binary: ENOENT).
 */
export interface Relaunched {
  readonly pid?: number;
  readonly error?: string;
  /** The program's exit status once it has ended (a relaunch that dies at once), else null. */
  readonly exitCode: () => number | null;
}

export function relaunch(argv: readonly string[], logFile: string | undefined): Promise<Relaunched> {
  let ended: number | null = null;
  const exitCode = () => ended;
  return new Promise((resolve) => {
    let fd: number | 'ignore' = 'ignore';
    const release = () => {
      if (typeof fd === 'number') closeSync(fd);
      fd = 'ignore';
    };
    try {
      if (logFile) fd = openSync(logFile, 'a', 0o600);
      const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', fd, fd] });
      child.once('error', (err) => {
        release();
        resolve({ error: err.message, exitCode });
      });
      child.once('exit', (code, signal) => {
        ended = code ?? (signal ? 128 : -1);
      });
      child.once('spawn', () => {
        release();
        child.unref();
        resolve({ pid: child.pid!, exitCode });
      });
    } catch (err) {
      release();
      resolve({ error: (err as Error).message, exitCode });
    }
  });
}

// ---- files -------------------------------------------------------------------------------------

/** The last `maxBytes` of a file as lines (the first, partial one dropped); [] when absent. */
export function tailLines(file: string, maxBytes = 4 * 1024 * 1024): string[] {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return [];
  }
  try {
    const size = statSync(file).size;
    const start = Math.max(0, size - maxBytes);
    const buf = Buffer.alloc(size - start);
    const n = buf.length > 0 ? readFully(fd, buf, start) : 0;
    const lines = buf.subarray(0, n).toString('utf8').split('\n');
    return start > 0 ? lines.slice(1) : lines;
  } finally {
    closeSync(fd);
  }
}

function readFully(fd: number, buf: Buffer, position: number): number {
  let off = 0;
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, position + off);
    if (n === 0) break;
    off += n;
  }
  return off;
}

/** Writes a file atomically: a temp file beside it, fsync, rename, fsync of the directory. */
export function writeAtomic(file: string, data: string, mode = 0o600): void {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  try {
    const dfd = openSync(dirname(file), 'r');
    fsyncSync(dfd);
    closeSync(dfd);
  } catch {
    // some filesystems refuse to fsync a directory
  }
}

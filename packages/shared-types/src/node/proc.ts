/**
 * Processes: is a pid alive (zombie-aware), the process table, which processes run a program,
 * who listens on a port, ending processes (TERM, then KILL).
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { basename } from 'node:path';
import { runCommand } from './command.js';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * True when `pid` is a live process. A process killed but not yet reaped (a zombie) is dead,
 * though signal 0 still finds it (Linux: read from /proc). A process of another user is alive.
 */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.charAt(stat.lastIndexOf(')') + 2);
    if (state === 'Z' || state === 'X') return false;
  } catch {
    // no /proc (macOS), or no such process: signal 0 says
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface ProcessInfo {
  readonly pid: number;
  /** The command line's words (from /proc exactly; from `ps` split at spaces). */
  readonly argv: readonly string[];
  readonly command: string;
}

/**
 * The pids among a directory listing of /proc, in number order. Node lists a directory's names
 * sorted as strings, which puts pid 10001 before 9967; in number order, what names several
 * processes names them in the order they were started (pids wrapping around aside).
 */
export function procPids(names: readonly string[]): number[] {
  return names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
}

/** Every process with its command line, by pid: /proc on Linux, `ps` elsewhere (macOS). */
export async function listProcesses(): Promise<ProcessInfo[]> {
  if (process.platform === 'linux') {
    const out: ProcessInfo[] = [];
    for (const pid of procPids(readdirSync('/proc'))) {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
        if (argv.length > 0) out.push({ pid, argv, command: argv.join(' ') });
      } catch {
        // gone meanwhile
      }
    }
    return out;
  }
  const { stdout } = await runCommand(['ps', '-axww', '-o', 'pid=,command='], 5000);
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
 * (node…) runs a script called `name` or `name.js` (flags before the script are skipped). `name`
 * may be a base name (`signal-daemon`, `signal-daemon.js`) or a path (then the path must match).
 * An editor or `tail -f name.log` is not the program.
 */
export function runsProgram(argv: readonly string[], name: string): boolean {
  if (argv.length === 0) return false;
  const matches = (word: string) => (name.includes('/') ? word === name : stem(word) === stem(name));
  if (matches(argv[0]!)) return true;
  if (!INTERPRETER.test(basename(argv[0]!))) return false;
  const script = argv.slice(1).find((a) => !a.startsWith('-'));
  return script !== undefined && matches(script);
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

/**
 * The /proc/net/tcp{,6} forms of an IPv4 address a socket bound to it may show: the address itself
 * (little-endian hex), v4-mapped in tcp6, and the wildcards that also accept it. Null for a host
 * that is not an IPv4 literal (then every address matches).
 */
function procAddressesFor(host: string | undefined): Set<string> | null {
  const m = host === undefined ? null : /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(host);
  if (!m) return null;
  const le = m
    .slice(1, 5)
    .reverse()
    .map((o) => Number(o).toString(16).padStart(2, '0'))
    .join('')
    .toUpperCase();
  return new Set([le, '00000000', `0000000000000000FFFF0000${le}`, '00000000000000000000000000000000']);
}

/** Socket inodes in a LISTEN (0A) or ESTABLISHED (01) state on a local or remote port (Linux). */
function procNetInodes(port: number, state: '0A' | '01', side: 'local' | 'remote', host?: string): Set<string> {
  const addresses = side === 'local' ? procAddressesFor(host) : null;
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
      const [ip, hexPort] = (side === 'local' ? f[1] : f[2])?.split(':') ?? [];
      if (Number.parseInt(hexPort ?? '', 16) !== port) continue;
      if (addresses && !addresses.has(ip ?? '')) continue;
      inodes.add(f[9]!);
    }
  }
  return inodes;
}

function pidsOwning(inodes: Set<string>): number[] {
  if (inodes.size === 0) return [];
  const pids: number[] = [];
  for (const pid of procPids(readdirSync('/proc'))) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) {
          pids.push(pid);
          break;
        }
      } catch {
        // closed meanwhile
      }
    }
  }
  return pids;
}

/**
 * The processes listening on a TCP port, found by port (not by name); with `host` (an IPv4
 * literal, Linux), only those whose listener accepts connections to that address (bound to it or
 * to a wildcard), so a listener on 127.0.0.2:PORT is not taken for one on 127.0.0.1:PORT.
 */
export async function listenersOn(port: number, host?: string): Promise<number[]> {
  if (process.platform === 'linux') return pidsOwning(procNetInodes(port, '0A', 'local', host));
  const { stdout } = await runCommand(['lsof', '-nP', `-iTCP:${port}`, '-sTCP:LISTEN', '-t'], 5000);
  return stdout.split('\n').filter(Boolean).map(Number);
}

/** How many established TCP connections have this port as their remote end (consumers of a listener). */
export async function establishedTo(port: number): Promise<number> {
  if (process.platform === 'linux') return procNetInodes(port, '01', 'remote').size;
  const { stdout } = await runCommand(['lsof', '-nP', `-iTCP:${port}`, '-sTCP:ESTABLISHED'], 5000);
  return stdout.split('\n').filter((l) => new RegExp(`->[^ ]*:${port}\\b`).test(l)).length;
}

/**
 * Ends processes: SIGTERM, then SIGKILL for those still alive after `graceMs` (a process that
 * ignores SIGTERM or is stopped with SIGSTOP is killed all the same). True when all are gone.
 */
export async function killAll(pids: readonly number[], graceMs = 3000): Promise<boolean> {
  const signal = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (pids.some(pidAlive) && Date.now() < deadline) await sleep(25);
  const left = pids.filter(pidAlive);
  for (const pid of left) signal(pid, 'SIGKILL');
  const killDeadline = Date.now() + 2000;
  while (left.some(pidAlive) && Date.now() < killDeadline) await sleep(10);
  return !pids.some(pidAlive);
}

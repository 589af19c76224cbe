/**
 * Which daemon processes are this health check's own. A daemon is ours when it runs
 * `daemon.program` (with every `daemon.processMatch` substring) for the configured account; a
 * daemon of another account on the same host (and local network) is reported, never touched.
 */
import { readFileSync } from 'node:fs';
import { findProcesses, killAll, listenersOn, type ProcessInfo } from '@vigil/shared-types/node';
import { daemonStatus } from '../io/http.js';
import type { CheckContext } from './check.js';

/** The daemon's environment variable for `--account` (used when the flag is not given). */
export const ACCOUNT_ENV = 'SIGNAL_DAEMON_ACCOUNT';

/**
 * The account on a daemon's command line, read as its option parser (commander) and signal-cli
 * read `-a, --account`: `--account X`, `--account=X`, `-a X`, `-aX`; the last one counts; nothing
 * after `--`.
 */
export function accountInArgv(argv: readonly string[]): string | undefined {
  let account: string | undefined;
  for (let i = 1; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === '--') break;
    if (word === '-a' || word === '--account') {
      if (i + 1 < argv.length) account = argv[++i];
    } else if (word.startsWith('--account=')) account = word.slice('--account='.length);
    else if (word.length > 2 && word.startsWith('-a')) account = word.slice(2);
  }
  return account || undefined;
}

/** SIGNAL_DAEMON_ACCOUNT in a process's environment (Linux, a process of this user), else undefined. */
function accountInEnviron(pid: number): string | undefined {
  try {
    const prefix = `${ACCOUNT_ENV}=`;
    const entry = readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .find((e) => e.startsWith(prefix));
    return entry?.slice(prefix.length) || undefined;
  } catch {
    return undefined;
  }
}

export interface DaemonProcess extends ProcessInfo {
  /** The account it serves, from its flags, else its environment; undefined when unreadable. */
  readonly account?: string;
}

export interface Daemons {
  /** The configured account, when it can be told. */
  readonly account?: string;
  /** This account's daemons. */
  readonly ours: readonly DaemonProcess[];
  /** Daemons of other accounts, or whose account cannot be read and which do not serve our address. */
  readonly others: readonly DaemonProcess[];
  /** The pids listening on the port of `daemon.http` (any program). */
  readonly listeners: readonly number[];
}

/**
 * Finds the daemons and tells ours from the others. The configured account is the one
 * `daemon.relaunch` starts (its flags, else SIGNAL_DAEMON_ACCOUNT of this environment, which a
 * relaunch inherits); else an entry of `daemon.processMatch` that is exactly a running daemon's
 * account; else the account of the daemon listening on `daemon.http`'s port (its flags, its
 * environment, or, with `askStatus`, its JSON status). A daemon whose account cannot be read is
 * ours only when it listens on that port.
 */
export async function findDaemons(ctx: CheckContext, opts: { askStatus: boolean }): Promise<Daemons> {
  const d = ctx.config.daemon;
  const found = (await findProcesses({ program: d.program, match: d.processMatch })).map(
    (p): DaemonProcess => ({ ...p, account: accountInArgv(p.argv) ?? accountInEnviron(p.pid) }),
  );
  const listeners = await listenersOn(d.http.port, d.http.host);
  const serving = found.filter((p) => listeners.includes(p.pid));
  let account =
    d.relaunch && d.relaunch.length > 0 ? (accountInArgv(d.relaunch) ?? process.env[ACCOUNT_ENV]) : undefined;
  account ||= d.processMatch.find((m) => found.some((p) => p.account === m));
  account ||= serving.find((p) => p.account)?.account;
  if (!account && opts.askStatus && found.length > 0) {
    account = (await daemonStatus(d.http, ctx.config.timeouts.checkMs))?.account || undefined;
  }
  const isOurs = (p: DaemonProcess) =>
    p.account === undefined ? listeners.includes(p.pid) : account !== undefined && p.account === account;
  return {
    ...(account ? { account } : {}),
    ours: found.filter(isOurs),
    others: found.filter((p) => !isOurs(p)),
    listeners,
  };
}

/** "+1… (pid 1), account unknown (pid 2)": daemons as a person reads them. */
export function describe(procs: readonly DaemonProcess[]): string {
  return procs.map((p) => `${p.account ?? 'account unknown'} (pid ${p.pid})`).join(', ');
}

/**
 * Ends processes: SIGTERM, then SIGCONT (so that a stopped process sees the TERM and shuts down
 * cleanly), then SIGKILL for any still alive after `graceMs`. True when all are gone.
 */
export async function endProcesses(pids: readonly number[], graceMs = 3000): Promise<boolean> {
  const ending = killAll(pids, graceMs); // sends SIGTERM at once
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // already gone
    }
  }
  return ending;
}

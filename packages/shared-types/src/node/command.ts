/**
 * Runs a command as an argv array, never through a shell, with a time limit. `rc` is its exit
 * status; when it could not run at all, or ran too long, the conventions of timeout(1) and of
 * shells: 124 timed out (killed), 126 not executable, 127 not found, 128 + n killed by signal n.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { type ServiceAction, type ServiceManagerConfig, serviceArgv } from '../service.js';

export const RC_TIMED_OUT = 124;
export const RC_NOT_EXECUTABLE = 126;
export const RC_NOT_FOUND = 127;

export interface CommandResult {
  readonly rc: number;
  /** What it printed (each bounded to `maxOutputBytes`). */
  readonly stdout: string;
  readonly stderr: string;
  /** A short account for a log line: what it printed (stderr first), or why it did not run. */
  readonly detail: string;
  readonly ms: number;
}

export interface CommandOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Output kept per stream (default 1 MiB); the rest is read and dropped. */
  readonly maxOutputBytes?: number;
}

export function runCommand(
  argv: readonly string[],
  timeoutMs: number,
  options: CommandOptions = {},
): Promise<CommandResult> {
  const t0 = performance.now();
  const keep = options.maxOutputBytes ?? 1 << 20;
  const [file, ...args] = argv;
  if (!file) return Promise.resolve({ rc: RC_NOT_FOUND, stdout: '', stderr: '', detail: 'empty command', ms: 0 });
  return new Promise((resolve) => {
    let out = '';
    let err = '';
    let timedOut = false;
    let settled = false;
    const settle = (rc: number, detail: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // A daemon the command left behind must not keep this process alive through the pipes.
      child.stdout?.destroy();
      child.stderr?.destroy();
      resolve({
        rc,
        stdout: out,
        stderr: err,
        detail: detail.replace(/\s+/g, ' ').trim().slice(0, 500),
        ms: performance.now() - t0,
      });
    };
    const child = spawn(file, args, {
      shell: false,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env ?? process.env,
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (s: string) => {
      if (out.length < keep) out += s.slice(0, keep - out.length);
    });
    child.stderr.on('data', (s: string) => {
      if (err.length < keep) err += s.slice(0, keep - err.length);
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      const notFound = e.code === 'ENOENT';
      settle(notFound ? RC_NOT_FOUND : RC_NOT_EXECUTABLE, `${file}: ${notFound ? 'command not found' : e.message}`);
    });
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      const said = (err.trim() || out.trim()).slice(0, 2000);
      if (timedOut) {
        settle(RC_TIMED_OUT, `${file}: no exit within ${timeoutMs / 1000} s, killed${said ? `: ${said}` : ''}`);
      } else if (code !== null) settle(code, said);
      else {
        const n = signal ? ((constants.signals as Record<string, number>)[signal] ?? 0) : 0;
        settle(128 + n, `${file}: killed by ${signal}${said ? `: ${said}` : ''}`);
      }
    };
    // 'close' waits for the pipes too, which a daemon the command left behind may hold open:
    // after 'exit', its output gets a moment to arrive, no more.
    child.on('close', done);
    child.on('exit', (code, signal) => {
      setTimeout(() => done(code, signal), 100).unref();
    });
  });
}

/** The user id a launchd domain is named after (`gui/UID`); 0 where the platform has none. */
export const currentUid = (): number => process.getuid?.() ?? 0;

export interface ServiceActionResult extends CommandResult {
  /** The argv that was run, or null when the manager has no command for the action. */
  readonly argv: string[] | null;
}

/** Performs a service-manager action (restart, stop, start) through its argv, bounded in time. */
export async function runServiceAction(
  manager: ServiceManagerConfig,
  action: ServiceAction,
  timeoutMs: number,
  options: CommandOptions = {},
): Promise<ServiceActionResult> {
  const argv = serviceArgv(manager, action, currentUid());
  if (!argv) {
    const detail = `no ${action} command configured`;
    return { rc: RC_NOT_FOUND, stdout: '', stderr: '', detail, ms: 0, argv: null };
  }
  return { ...(await runCommand(argv, timeoutMs, options)), argv };
}

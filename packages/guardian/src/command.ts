/**
 * Runs a command as an argv array, never through a shell, with a time limit. `rc` is its exit
 * status; when it could not run at all, or ran too long, the conventions of timeout(1) and of
 * shells: 124 timed out (killed), 126 not executable, 127 not found, 128 + n killed by signal n.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

export interface CommandResult {
  readonly rc: number;
  /** A short account for the log: what it printed (stderr first), or why it did not run. */
  readonly detail: string;
  readonly ms: number;
}

const KEEP = 2000;

export function runCommand(
  argv: readonly string[],
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CommandResult> {
  const t0 = performance.now();
  const [file, ...args] = argv;
  if (!file) return Promise.resolve({ rc: 127, detail: 'empty command', ms: 0 });
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
      resolve({ rc, detail: detail.replace(/\s+/g, ' ').trim().slice(0, 500), ms: performance.now() - t0 });
    };
    const child = spawn(file, args, { shell: false, stdio: ['ignore', 'pipe', 'pipe'], env });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (s: string) => {
      if (out.length < KEEP) out += s;
    });
    child.stderr.on('data', (s: string) => {
      if (err.length < KEEP) err += s;
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      const rc = e.code === 'ENOENT' ? 127 : e.code === 'EACCES' ? 126 : 126;
      settle(rc, `${file}: ${e.code === 'ENOENT' ? 'command not found' : e.message}`);
    });
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      const said = (err.trim() || out.trim()).slice(0, KEEP);
      if (timedOut) settle(124, `${file}: no exit within ${timeoutMs / 1000} s, killed${said ? `: ${said}` : ''}`);
      else if (code !== null) settle(code, said);
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

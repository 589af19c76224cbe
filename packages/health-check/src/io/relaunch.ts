/** Starting a program detached from this process: a daemon brought back when its service manager cannot. */
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { constants } from 'node:os';
import { PRIVATE_FILE } from '@vigil/shared-types/node';

export interface Relaunched {
  readonly pid?: number;
  readonly error?: string;
  /**
   * The program's exit status once it has ended (a relaunch that dies at once), else null; killed
   * by a signal: 128 + its number, as shells and the command runner say.
   */
  readonly exitCode: () => number | null;
}

/**
 * Starts a program detached from this process (it outlives the check), output appended to a log.
 * Resolves once it has started, or with the reason it could not (a missing binary: ENOENT).
 */
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
      if (logFile) fd = openSync(logFile, 'a', PRIVATE_FILE);
      const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ['ignore', fd, fd] });
      child.once('error', (err) => {
        release();
        resolve({ error: err.message, exitCode });
      });
      child.once('exit', (code, signal) => {
        ended = code ?? 128 + (signal ? ((constants.signals as Record<string, number>)[signal] ?? 0) : 0);
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

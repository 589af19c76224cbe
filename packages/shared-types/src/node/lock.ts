/**
 * A lock file holding its owner's pid: one guardian updating its state, one health check running.
 * A lock whose owner is dead (killed with -9) or older than `staleMs` is taken over; a live one is
 * waited for, at most `waitMs`, then LockBusyError.
 */
import { closeSync, linkSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { VIGIL_ERRORS, VigilError } from '../errors.js';
import { ensureDir, PRIVATE_DIR, PRIVATE_FILE } from './fs.js';
import { pidAlive, sleep } from './proc.js';

export class LockBusyError extends VigilError {
  constructor(
    readonly path: string,
    readonly pid: number | null,
  ) {
    super(VIGIL_ERRORS.VIGIL_ERR_LOCK_BUSY, `${path} is held by another process${pid ? ` (pid ${pid})` : ''}`);
  }
}

export interface LockOptions {
  /** How long to wait for a live owner (default 0: fail at once). */
  readonly waitMs?: number;
  /** A lock older than this is taken over whoever holds it (default: never). */
  readonly staleMs?: number;
}

/** Takes the lock and returns its release (which is idempotent and only removes our own lock). */
export async function acquireLock(path: string, options: LockOptions = {}): Promise<() => void> {
  const waitMs = options.waitMs ?? 0;
  const staleMs = options.staleMs ?? Number.POSITIVE_INFINITY;
  ensureDir(dirname(path), PRIVATE_DIR);
  const deadline = Date.now() + waitMs;
  const mine = join(dirname(path), `.${basename(path)}.${process.pid}`);
  for (;;) {
    // Written beside it first and then linked: the lock never exists without its pid.
    const fd = openSync(mine, 'w', PRIVATE_FILE);
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    try {
      linkSync(mine, path);
      unlinkSync(mine);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      unlinkSync(mine);
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let pid: number | null = null;
    let stale = false;
    try {
      pid = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (!Number.isInteger(pid) || pid <= 0) pid = null;
      const age = Date.now() - statSync(path).mtimeMs;
      stale = pid === null || pid === process.pid || !pidAlive(pid) || age > staleMs;
    } catch {
      continue; // released meanwhile: try again at once
    }
    if (stale) {
      try {
        unlinkSync(path);
      } catch {
        // someone else took it over first
      }
      continue;
    }
    if (Date.now() >= deadline) throw new LockBusyError(path, pid);
    await sleep(25);
  }
}

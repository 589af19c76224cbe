/**
 * The guardian's files: written atomically (a temporary file beside the target, fsync, rename),
 * so that a `kill -9` at any point leaves either the old or the new content, never a mix; and the state file's own lock, which keeps two guardians (a `run`
 * and an operator's `reset`, say) from updating the state at the same time.
 */
import {
  closeSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Writes a file atomically (temporary file, fsync, rename); creates its directory (0700) when
 * missing. With `syncDir`, the directory is fsynced too, so that the rename itself survives a
 * power loss (the lock file); without, a power loss may leave the previous version (the state
 * file, written every tick: its previous version is a valid state).
 */
export function writeFileAtomic(path: string, data: string, mode = 0o600, syncDir = false): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // One writer at a time holds the state lock, so one temporary name per file is enough, and a
  // temporary left by a killed writer is simply overwritten.
  const tmp = join(dir, `.${basename(path)}.tmp`);
  const fd = openSync(tmp, 'w', mode);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  if (syncDir) fsyncDir(dir);
}

function fsyncDir(dir: string): void {
  let fd: number | null = null;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Not every platform can fsync a directory; the rename is still atomic.
  } finally {
    if (fd !== null) closeSync(fd);
  }
}

/** Removes a file; true when it existed. */
export function removeFile(path: string): boolean {
  try {
    unlinkSync(path);
    fsyncDir(dirname(path));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** The file's text, or null when it does not exist. */
export function readTextOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

export function fileExists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Another guardian holds the state lock longer than we can wait. */
export class StateBusyError extends Error {
  readonly code = 'EBUSY';
  constructor(
    readonly path: string,
    readonly pid: number | null,
  ) {
    super(`another guardian${pid ? ` (pid ${pid})` : ''} is updating ${path}; try again`);
    this.name = 'StateBusyError';
  }
}

function alive(pid: number): boolean {
  try {
    // Linux: a process killed but not yet reaped (a zombie) is dead, though signal 0 finds it.
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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Takes `path` (the state file's lock: it holds the owner's pid) and returns its release. A lock
 * whose owner is dead (a guardian killed with -9), or older than `staleMs`, is taken over; a live
 * one is waited for, at most `waitMs`.
 */
export async function acquireLock(path: string, waitMs: number, staleMs: number): Promise<() => void> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + waitMs;
  const mine = join(dirname(path), `.${basename(path)}.${process.pid}`);
  for (;;) {
    // Written beside it first and then linked: the lock never exists without its pid.
    const fd = openSync(mine, 'w', 0o600);
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
      stale = pid === null || pid === process.pid || !alive(pid) || age > staleMs;
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
    if (Date.now() >= deadline) throw new StateBusyError(path, pid);
    await sleep(25);
  }
}

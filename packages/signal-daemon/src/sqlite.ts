import Database from 'better-sqlite3';
import { preparePrivateDatabase } from './files.js';

/** How long opening waits for other processes' locks on the file (it happens only at start). */
export const OPEN_WAIT_MS = 30_000;
/** How long a statement waits for another connection's lock. */
export const BUSY_TIMEOUT_MS = 5000;

/**
 * How a commit reaches the disk (SQLite's `synchronous`, in WAL mode). Both keep every commit
 * through a crash of the process (kill -9): the WAL is written before the commit returns.
 * normal: the WAL is fsynced at checkpoints only, so a power cut or a kernel crash may undo the
 * commits of the last moments (the file stays consistent); full: the WAL is fsynced at every
 * commit, so an answered send survives a power cut too, at the cost of one fsync per commit
 * (group commit shares it among the sends of a turn).
 */
export type Synchronous = 'normal' | 'full';

/** A lock held by another process: worth waiting for, never a configuration error. */
export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * Opens (creating if needed) a SQLite file the way vigil uses them: WAL, shared by processes,
 * the file and its `-wal`/`-shm` 0600 whatever the umask.
 *
 * Daemons started at the same moment on a new file all switch it to WAL; SQLite answers one of
 * them "database is locked" at once (without its busy timeout: waiting could deadlock). That is
 * retried, after 5 ms, 10 ms … up to 250 ms apart (with jitter), for up to `waitMs`. It blocks the
 * thread, which is fine at start, before anything is served.
 */
export function openDatabase(
  file: string,
  synchronous: Synchronous = 'normal',
  waitMs = OPEN_WAIT_MS,
): Database.Database {
  preparePrivateDatabase(file);
  const db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  try {
    const deadline = Date.now() + waitMs;
    for (let delay = 5; ; delay = Math.min(delay * 2, 250)) {
      try {
        const mode = db.pragma('journal_mode = WAL', { simple: true });
        if (mode === 'wal') break;
        throw Object.assign(new Error(`the file stays in journal mode ${String(mode)}`), { code: 'SQLITE_BUSY' });
      } catch (err) {
        if (!isBusy(err) || Date.now() + delay > deadline) throw err;
        sleepSync(delay + Math.random() * delay);
      }
    }
    // See Synchronous: in WAL mode NORMAL and FULL both survive kill -9; FULL survives a power cut.
    db.pragma(`synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    // Daemons in other processes write the same file: wait for them rather than fail.
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.pragma('foreign_keys = ON');
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

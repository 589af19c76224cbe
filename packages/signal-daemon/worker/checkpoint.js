/**
 * The local network's checkpointer (see src/localnet/checkpoint.ts), as a worker thread: its own
 * connection to the SQLite file, a PASSIVE checkpoint every interval, and a TRUNCATE (waiting at
 * most 10 ms for readers) when the WAL is over the limit and no commit was made since the last
 * interval, or when it is over HARD_LIMIT_FACTOR times the limit whatever the traffic. It ends when
 * told to, or with the process (the thread does not keep it alive).
 *
 * Plain JavaScript, outside src/, on purpose: a worker thread runs a JavaScript file, and the
 * daemon runs both from dist/ (compiled) and, under jest, from its TypeScript sources, where a
 * compiled worker would be missing or stale. This file is at the same place relative to
 * src/localnet/ and to dist/localnet/ (../../worker/), needs no build, and its types are in
 * checkpoint.d.ts beside it. `checkpointOnce` is also what the daemon runs on its own thread
 * when no worker can start.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';

/** Over this many times the limit, the WAL is truncated even while commits are made. */
export const HARD_LIMIT_FACTOR = 8;

/**
 * Checkpoints once; a busy or closing database is left for the next tick. `last` is the previous
 * tick's WAL size in frames (kept by the caller between ticks).
 *
 * A TRUNCATE holds the file's write lock while it copies the rest of the WAL, waits for readers
 * and syncs (7–50 ms measured under the bench's load, once a second): every send and delivery
 * waits meanwhile. While commits flow, the WAL may start over by itself once a PASSIVE
 * checkpoint has copied all of it and no reader uses it (journal_size_limit then cuts the file
 * back to the limit); a TRUNCATE is made only when no commit was made since the last tick (it
 * stops nobody) or as a bound when the WAL is far over the limit (then every few seconds under
 * steady traffic, not every second).
 */
export function checkpointOnce(db, pageSize, walLimitBytes, busyTimeoutMs, last = { log: -1 }) {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    const quiet = r && r.log === last.log;
    if (r) last.log = r.log;
    const bytes = r ? r.log * pageSize : 0;
    if (bytes > walLimitBytes * (quiet ? 1 : HARD_LIMIT_FACTOR)) {
      db.pragma('busy_timeout = 10');
      try {
        db.pragma('wal_checkpoint(TRUNCATE)');
      } finally {
        db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      }
    }
  } catch {
    // busy or closing: the next tick tries again
  }
}

const job = isMainThread ? undefined : workerData?.localnetCheckpointer;
if (job && parentPort) {
  const port = parentPort;
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(job.file);
  db.pragma('busy_timeout = 0');
  const pageSize = db.pragma('page_size', { simple: true });
  const last = { log: -1 };
  const timer = setInterval(() => checkpointOnce(db, pageSize, job.walLimitBytes, 0, last), job.intervalMs);
  port.once('message', () => {
    clearInterval(timer);
    db.close();
    port.close();
  });
}

/**
 * The local network's checkpointer (see src/localnet/checkpoint.ts), as a worker thread: its own
 * connection to the SQLite file, a PASSIVE checkpoint every interval and a TRUNCATE (waiting at
 * most 10 ms for readers) once the WAL is over the limit. It ends when told to, or with the
 * process (the thread does not keep it alive).
 *
 * Plain JavaScript, outside src/, on purpose: a worker thread runs a JavaScript file, and the
 * daemon runs both from dist/ (compiled) and, under jest, from its TypeScript sources, where a
 * compiled worker would be missing or stale. This file is at the same place relative to
 * src/localnet/ and to dist/localnet/ (../../worker/), needs no build, and its types are in
 * checkpoint.d.ts beside it. `checkpointOnce` is also what the daemon runs on its own thread
 * when no worker can start.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';

/** Checkpoints once; a busy or closing database is left for the next tick. */
export function checkpointOnce(db, pageSize, walLimitBytes, busyTimeoutMs) {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    if (r && r.log * pageSize > walLimitBytes) {
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
  const timer = setInterval(() => checkpointOnce(db, pageSize, job.walLimitBytes, 0), job.intervalMs);
  port.once('message', () => {
    clearInterval(timer);
    db.close();
    port.close();
  });
}

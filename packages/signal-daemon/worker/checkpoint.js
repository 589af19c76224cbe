/**
 * The local network's checkpointer (see src/localnet/checkpoint.ts), as a worker thread: its own
 * connection to the SQLite file, a PASSIVE checkpoint every interval, and a TRUNCATE (waiting at
 * most 10 ms for readers) when the WAL is over the limit and no commit was made since the last
 * interval, or when it is over HARD_LIMIT_FACTOR times the limit whatever the traffic; with
 * `reportSynced`, it posts `{ synced: time }` after each checkpoint that found every commit made
 * before `time` in the database file, on disk (see checkpointOnce). It ends when told to, or with
 * the process (the thread does not keep it alive).
 *
 * Plain JavaScript, outside src/, on purpose: a worker thread runs a JavaScript file, and the
 * daemon runs both from dist/ (compiled) and, under jest, from its TypeScript sources, where a
 * compiled worker would be missing or stale. This file is at the same place relative to
 * src/localnet/ and to dist/localnet/ (../../worker/), needs no build, and its types are in
 * checkpoint.d.ts beside it. `checkpointOnce` is also what the daemon runs on its own thread
 * when no worker can start.
 */
import { statSync } from 'node:fs';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';

/** Over this many times the limit, the WAL is truncated even while commits are made. */
export const HARD_LIMIT_FACTOR = 8;

/**
 * Checkpoints once; a busy or closing database is left for the next tick. `last` is the previous
 * tick's WAL size in frames (kept by the caller between ticks).
 *
 * While commits flow, a WAL over the limit is RESTARTed right after the PASSIVE checkpoint has
 * copied nearly all of it: the restart holds the file's write lock only to copy the few frames
 * committed since and to wait (at most RESTART_WAIT_MS) for readers of the old frames, then the
 * next commit writes the WAL from its start again, over the same file (timed in the bench: 0-17 ms,
 * most under 10, the copy's fsyncs; more when the disk is busy). The file is not cut meanwhile:
 * a truncation of a WAL of tens of MB (its copy, fsyncs and the ftruncate that frees its blocks)
 * took 14-51 ms under the bench's load, with every writer of every daemon stopped behind the lock
 * (the p99 of a paced send). So the file keeps the size it reached, about
 * the limit plus one tick of commits, and is TRUNCATEd (to 0) only when no commit was made since
 * the last tick (it stops nobody), or as a bound when the WAL is over HARD_LIMIT_FACTOR times the
 * limit (restarts kept failing: a reader never let go).
 */
export function checkpointOnce(db, pageSize, walLimitBytes, busyTimeoutMs, last = { log: -1 }) {
  let synced = false;
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    // Every frame the WAL held when it began is in the database file, which the checkpoint
    // fsynced once it had copied them (or an earlier one did, when there was nothing to copy).
    synced = r !== undefined && r.busy === 0 && r.checkpointed === r.log;
    const quiet = r && r.log === last.log;
    if (r) last.log = r.log;
    const bytes = r ? r.log * pageSize : 0;
    if (quiet ? walFileBytes(db) > walLimitBytes : bytes > walLimitBytes * HARD_LIMIT_FACTOR) {
      withBusyTimeout(db, TRUNCATE_WAIT_MS, busyTimeoutMs, 'TRUNCATE');
    } else if (!quiet && bytes > walLimitBytes) {
      // The first PASSIVE copied most of the WAL, but commits came while it ran (tens of ms);
      // a second one copies those without the lock, so that the restart has little left to do.
      db.pragma('wal_checkpoint(PASSIVE)');
      withBusyTimeout(db, RESTART_WAIT_MS, busyTimeoutMs, 'RESTART');
    }
  } catch {
    // busy or closing: the next tick tries again
  }
  return synced;
}

/** How long a TRUNCATE and a RESTART wait for the write lock and for readers, in ms. */
const TRUNCATE_WAIT_MS = 10;
const RESTART_WAIT_MS = 2;

function withBusyTimeout(db, waitMs, busyTimeoutMs, mode) {
  db.pragma(`busy_timeout = ${waitMs}`);
  try {
    db.pragma(`wal_checkpoint(${mode})`);
  } finally {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
}

/** The WAL file's size on disk (after a restart it is larger than the frames in use). */
function walFileBytes(db) {
  try {
    return statSync(`${db.name}-wal`).size;
  } catch {
    return 0;
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
  const timer = setInterval(() => {
    const at = Date.now();
    if (checkpointOnce(db, pageSize, job.walLimitBytes, 0, last) && job.reportSynced) port.postMessage({ synced: at });
  }, job.intervalMs);
  port.once('message', () => {
    clearInterval(timer);
    db.close();
    port.close();
  });
}

/**
 * Checkpoints of the local network's WAL, and of each daemon's inbox (see mail-position.ts).
 * Several daemons write the network file all the time, so SQLite's automatic checkpoint rarely
 * completes and is retried, with fsyncs, at nearly every commit. Instead each daemon checkpoints
 * once a second: passively, then, once the WAL is over the limit, a restart (the next commit
 * writes the WAL from its start, over the same file), and a truncation (at most 10 ms of waiting
 * for readers) only once no commit came in the last second, or the WAL is far too large (see
 * worker/checkpoint.js: a truncation stops every writer while it runs); from a worker thread with
 * a connection of its own, so that the checkpoint's page writes and fsyncs (tens of ms) never stop
 * the event loop. Where a worker cannot start, on the daemon's own connection.
 */
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';
import { type CheckpointerJob, checkpointOnce, HARD_LIMIT_FACTOR } from '../../worker/checkpoint.js';

export const CHECKPOINT_MS = 1000;
export const WAL_LIMIT_BYTES = 8 * 1024 * 1024;
/**
 * The WAL file's bound (64 MiB), the daemons' journal_size_limit: a commit that starts the WAL over
 * cuts the file back only beyond it. A lower limit would have the first commit after each restart
 * (a send, on the event loop, holding the write lock) cut tens of MB of file, which is what the
 * checkpointer avoids.
 */
export const WAL_BOUND_BYTES = WAL_LIMIT_BYTES * HARD_LIMIT_FACTOR;

/**
 * The worker is a plain JavaScript file shipped in the package (worker/checkpoint.js, see its
 * comment for why): from src/localnet/ (jest) and from dist/localnet/ it is at ../../worker/.
 */
const WORKER = new URL('../../worker/checkpoint.js', import.meta.url);

/**
 * Starts checkpointing `file`; `db` is the daemon's own connection, used when no worker can run.
 * With `onSynced`, a tick whose checkpoint found every commit in the database file, on disk, calls
 * it with the time the tick began: every commit that returned before that time survives a power cut.
 */
export function startCheckpointer(
  file: string,
  db: Database.Database,
  busyTimeoutMs: number,
  onSynced?: (at: number) => void,
): { stop(): Promise<void> } {
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const inLoop = () => {
    const last = { log: -1 };
    const t = setInterval(() => {
      const at = Date.now();
      if (checkpointOnce(db, pageSize, WAL_LIMIT_BYTES, busyTimeoutMs, last)) onSynced?.(at);
    }, CHECKPOINT_MS);
    t.unref();
    return { stop: async () => clearInterval(t) };
  };
  const job: CheckpointerJob = {
    file,
    intervalMs: CHECKPOINT_MS,
    walLimitBytes: WAL_LIMIT_BYTES,
    reportSynced: onSynced !== undefined,
  };
  let worker: Worker;
  try {
    worker = new Worker(WORKER, { workerData: { localnetCheckpointer: job } });
  } catch {
    return inLoop();
  }
  worker.unref();
  if (onSynced) worker.on('message', (m: { synced?: unknown }) => typeof m?.synced === 'number' && onSynced(m.synced));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  let local: { stop(): Promise<void> } | null = null;
  let stopped = false;
  worker.once('error', () => {
    if (!stopped) local = inLoop();
  });
  return {
    // Resolves once the thread has closed its connection and exited: until then it may still
    // open the file (a thread slow to start would create it again after it was removed).
    stop: async () => {
      stopped = true;
      await local?.stop();
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}

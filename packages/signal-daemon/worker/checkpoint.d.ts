import type Database from 'better-sqlite3';

/** What the worker thread is given (as workerData.localnetCheckpointer). */
export interface CheckpointerJob {
  readonly file: string;
  readonly intervalMs: number;
  readonly walLimitBytes: number;
  /** Post `{ synced: time }` after each checkpoint that has every commit made before `time` on disk. */
  readonly reportSynced?: boolean;
}

/** Over this many times the limit, the WAL is truncated even while commits are made. */
export const HARD_LIMIT_FACTOR: number;

/**
 * Checkpoints once: PASSIVE; while commits come and the WAL is over the limit, a second PASSIVE
 * and a RESTART (2 ms for readers; the file is not cut); TRUNCATE (10 ms for readers) when the WAL
 * file is over the limit and the WAL did not change since the last tick (`last`, kept by the
 * caller), or the WAL is over HARD_LIMIT_FACTOR times the limit. True when every commit made
 * before it began is in the database file, on disk (the first PASSIVE copied the whole WAL).
 */
export function checkpointOnce(
  db: Database.Database,
  pageSize: number,
  walLimitBytes: number,
  busyTimeoutMs: number,
  last?: { log: number },
): boolean;

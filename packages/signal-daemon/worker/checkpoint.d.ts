import type Database from 'better-sqlite3';

/** What the worker thread is given (as workerData.localnetCheckpointer). */
export interface CheckpointerJob {
  readonly file: string;
  readonly intervalMs: number;
  readonly walLimitBytes: number;
}

/** Checkpoints once: PASSIVE, then TRUNCATE (10 ms for readers) when the WAL is over the limit. */
export function checkpointOnce(
  db: Database.Database,
  pageSize: number,
  walLimitBytes: number,
  busyTimeoutMs: number,
): void;

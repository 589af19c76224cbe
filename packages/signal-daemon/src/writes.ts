import type Database from 'better-sqlite3';
import { isBusy } from './sqlite.js';

/**
 * Writes to a SQLite file that other connections write too (other daemons' processes, a
 * checkpointer's thread), without stopping the event loop while one of them holds the write lock.
 */
export class LockedWriter {
  private writesWaiting = 0;
  private writeQueue: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Database.Database,
    private readonly busyTimeoutMs: number,
  ) {}

  /**
   * Runs a write that needs the file's write lock. SQLite's own wait for a lock held by another
   * process sleeps on the event loop (1, 2, 5, 10… ms at a time); here a busy lock is tried again
   * after a yield or a 1 ms timer instead, so the daemon goes on answering meanwhile, for up to
   * the busy timeout. Writes queue behind one that waits, so they commit in order.
   */
  write(fn: () => void): Promise<void> {
    if (this.writesWaiting === 0) {
      try {
        this.tryWrite(fn);
        return Promise.resolve();
      } catch (err) {
        if (!isBusy(err)) return Promise.reject(err);
      }
    }
    this.writesWaiting += 1;
    const done = this.writeQueue
      .then(() => this.retryWrite(fn))
      .finally(() => {
        this.writesWaiting -= 1;
      });
    this.writeQueue = done.catch(() => {});
    return done;
  }

  private tryWrite(fn: () => void): void {
    // A PRAGMA acts when it is prepared, so it cannot be a prepared statement run again.
    this.db.pragma('busy_timeout = 0');
    try {
      fn();
    } finally {
      this.db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
    }
  }

  private async retryWrite(fn: () => void): Promise<void> {
    const deadline = Date.now() + this.busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        this.tryWrite(fn);
        return;
      } catch (err) {
        if (!isBusy(err) || Date.now() > deadline) throw err;
      }
      await new Promise((resolve) => (attempt < 2 ? setImmediate(resolve) : setTimeout(resolve, 1)));
    }
  }
}

/**
 * Group commit of the network file's sends: the writes of the sends that arrive together (in one
 * turn of the event loop) are made in one IMMEDIATE transaction, so a burst pays for one write
 * lock and one commit instead of one per send. The group's writes run straight in the
 * transaction; should one of them fail, the transaction is rolled back and the group written again
 * with each send in a savepoint of its own, so that the failed one is rolled back alone and only
 * its promise rejects (the common case pays for no savepoints). A promise resolves only once the
 * transaction holding its rows has committed (an answered send is as durable as before).
 *
 * A write the sends of a group share (the same recipient made a contact, its key trusted on first
 * use) is made once per group: a send registers it with `once`, under a key, and the group runs
 * each key's write once, after its sends, in the same transaction; only for sends that succeeded.
 */
import type Database from 'better-sqlite3';
import { isBusy } from '../sqlite.js';

interface Pending {
  readonly fn: () => void;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

/** The most sends in one transaction (a few ms of write lock at most). */
export const GROUP_MAX = 256;

export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private readonly batch: Database.Transaction<(group: readonly Pending[]) => void>;
  private readonly isolated: Database.Transaction<(group: readonly Pending[]) => unknown[]>;
  /** The shared writes registered by the send running now (see once); null outside a group. */
  private shared: Map<string, () => void> | null = null;

  constructor(
    db: Database.Database,
    private readonly write: (fn: () => void) => Promise<void>,
  ) {
    // Prepared once: the group's transaction; and, after a failure, the same with a savepoint per send.
    this.batch = db.transaction((group: readonly Pending[]) => {
      const shared = new Map<string, () => void>();
      this.shared = shared;
      try {
        for (const p of group) p.fn();
      } finally {
        this.shared = null;
      }
      for (const write of shared.values()) write();
    });
    const one = db.transaction((fn: () => void) => fn());
    this.isolated = db.transaction((group: readonly Pending[]) => {
      const shared = new Map<string, () => void>();
      const failures = group.map((p) => {
        const mine = new Map<string, () => void>();
        this.shared = mine;
        try {
          one(p.fn);
        } catch (err) {
          return err ?? new Error('write failed');
        } finally {
          this.shared = null;
        }
        for (const [key, write] of mine) if (!shared.has(key)) shared.set(key, write);
        return undefined;
      });
      for (const write of shared.values()) write();
      return failures;
    });
  }

  /**
   * Called from a send's write: `write` runs once for the whole group under `key` (the first
   * registered), after the group's sends. Outside a group it runs at once.
   */
  once(key: string, write: () => void): void {
    if (this.shared === null) write();
    else if (!this.shared.has(key)) this.shared.set(key, write);
  }

  /** Runs `fn` in the next group's transaction; resolves once that has committed. */
  add(fn: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ fn, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const group = this.queue.splice(0, GROUP_MAX);
      let failures: unknown[] = [];
      this.write(() => {
        failures = [];
        let failed = false;
        try {
          this.batch.immediate(group);
        } catch (err) {
          // A lock held elsewhere (nothing ran yet) is the writer's to retry.
          if (isBusy(err)) throw err;
          failed = true;
        }
        if (failed) failures = this.isolated.immediate(group);
      }).then(
        () => {
          group.forEach((p, i) => {
            if (failures[i] === undefined) p.resolve();
            else p.reject(failures[i]);
          });
        },
        (err) => {
          for (const p of group) p.reject(err);
        },
      );
    }
  }
}

/**
 * Where a daemon's delivery stands in its mailbox on the local network.
 *
 * The inbox is a file of the daemon's own (`inbox.sqlite` in its data directory), so storing what
 * arrives never waits for the network file's write lock, which every daemon's sends take. The
 * transaction that stores a batch in the inbox also records the id of the batch's last mail, the
 * position: a mail is in the inbox exactly when its id is at most the position (the mailbox's ids
 * only grow), so a `kill -9` at any point loses nothing and delivers nothing twice.
 *
 * The mailbox rows up to the position are removed afterwards, once a second at most, and only those
 * the inbox holds on disk: its checkpointer (once a second) says when a checkpoint found every
 * commit in the database file, which it has fsynced (`synced`); what was committed before that
 * survives a power cut as well. So with `--synchronous normal` a power cut may undo the inbox's last
 * seconds, but the messages they held are still in the mailbox and are delivered again. (No fsync
 * of its own: each one on this path delays the other writers of the disk.)
 *
 * The position is kept with the network file's id: a network file made anew (its ids start at 1
 * again) is read from its start.
 */
import type { Logger } from '@vigil/shared-types';
import type Database from 'better-sqlite3';
import type { NetworkStore } from './store.js';

/**
 * The most mailbox rows removed in one write: about 0.3 ms of the write lock (3 ms at worst, seen
 * under load), as long as a group of sends holds it. Steps of 500 held it up to 6.5 ms, and the
 * sends of the other daemons waited behind them.
 */
export const SWEEP_BATCH = 100;

/**
 * Commits within this long of the first of them are noted as one (the latest's time and
 * position), and at most MAX_NOTED are kept while no checkpoint reports (a reader holding the WAL):
 * then the oldest goes, so its mail waits for a later report. Both only delay a removal.
 */
const NOTE_MS = 100;
const MAX_NOTED = 100;

export class MailPosition {
  private position: number;
  /** [when a commit returned, the position it recorded], oldest first, until a sync covers it. */
  private readonly committed: [number, number][] = [];
  /** When the newest entry of `committed` was started (see NOTE_MS). */
  private notedSince = 0;
  /** Every mail up to this is in the inbox on disk: its rows may go. */
  private durable = 0;
  /** The mailbox has no rows of ours up to this. */
  private swept = 0;
  private sweeping = false;
  /** Removing rows failed: logged once until it works again. */
  private failing = false;
  private stopped = false;
  private readonly s;

  constructor(
    inboxDb: Database.Database,
    private readonly store: NetworkStore,
    private readonly number: string,
    private readonly logger: Logger,
  ) {
    inboxDb.exec(`CREATE TABLE IF NOT EXISTS inbox_mail_position (
      account TEXT PRIMARY KEY, network TEXT NOT NULL, mail_id INTEGER NOT NULL) WITHOUT ROWID`);
    this.s = {
      read: inboxDb.prepare('SELECT network, mail_id AS mailId FROM inbox_mail_position WHERE account = ?'),
      write: inboxDb.prepare(
        `INSERT INTO inbox_mail_position (account, network, mail_id) VALUES (?, ?, ?)
         ON CONFLICT (account) DO UPDATE SET network = excluded.network, mail_id = excluded.mail_id`,
      ),
    };
    const row = this.s.read.get(number) as { network: string; mailId: number } | undefined;
    this.position = row?.network === store.id ? row.mailId : 0;
    // What a previous run left in the mailbox goes at the first sync (the WAL may not be on disk yet).
    this.committed.push([Date.now(), this.position]);
  }

  /** The id of the last mail in the inbox. */
  get at(): number {
    return this.position;
  }

  /** Records `lastId` as the position: inside the inbox's transaction that stores the mail up to it. */
  record(lastId: number): void {
    this.s.write.run(this.number, this.store.id, lastId);
  }

  /** That transaction committed. */
  recorded(lastId: number): void {
    this.position = lastId;
    const now = Date.now();
    const last = this.committed[this.committed.length - 1];
    if (last && now - this.notedSince < NOTE_MS) {
      last[0] = now;
      last[1] = lastId;
      return;
    }
    this.notedSince = now;
    this.committed.push([now, lastId]);
    if (this.committed.length > MAX_NOTED) this.committed.shift();
  }

  /** No more removals (the daemon stops): one under way ends at its next step, silently. */
  stop(): void {
    this.stopped = true;
  }

  /**
   * The inbox was on disk as of `at` (its checkpointer's): the mail of the commits that returned
   * before it is removed from the mailbox.
   */
  synced(at: number): void {
    let covered = 0;
    while (covered < this.committed.length && this.committed[covered]![0] < at) covered++;
    if (covered > 0) this.durable = Math.max(this.durable, this.committed[covered - 1]![1]);
    this.committed.splice(0, covered);
    this.sweep();
  }

  /**
   * Removes the mail up to the durable position in steps of at most SWEEP_BATCH rows, each a write
   * of its own with the event loop free between them: a second of mail at full rate is thousands of
   * rows, and one delete of them all would hold the file's write lock, which every send waits for,
   * for many milliseconds.
   */
  private sweep(): void {
    if (this.sweeping || this.stopped || this.durable <= this.swept) return;
    this.sweeping = true;
    const upTo = this.durable;
    const steps = async () => {
      while (!this.stopped) {
        let n = 0;
        await this.store.write(() => {
          n = this.store.deleteMailUpTo(this.number, upTo, SWEEP_BATCH);
        });
        if (n < SWEEP_BATCH) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    steps()
      .then(
        () => {
          this.swept = upTo;
          if (this.failing) this.logger.info('delivered mail is removed from the local network again');
          this.failing = false;
        },
        (err: unknown) => {
          // Tried again at the next sync, a second later; the network's retention bounds the rows meanwhile.
          if (!this.failing && !this.stopped) {
            this.logger.warn('cannot remove delivered mail from the local network; trying again every second', {
              error: String(err),
            });
          }
          this.failing = true;
        },
      )
      .finally(() => {
        this.sweeping = false;
      });
  }
}

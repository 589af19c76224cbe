/**
 * The reads a send makes before its transaction (the recipient's account, whether its key changed,
 * the contact's disappearing-message timer, this account's name), answered once per turn of the
 * event loop instead of once per send: the sends of one turn are written in one group commit
 * (group-commit.ts), and they read what the file held when the first of them looked.
 *
 * What may change under the memo, and why it stays correct:
 * - this daemon's own writes (trust, updateContact, updateProfile, a group commit, retention, on
 *   any of this connection's statements): `total_changes()` of the connection is compared at every
 *   look (it reads no table and takes no lock), so a change of ours empties the memo at once;
 * - another daemon's commits: the memo is emptied at the end of the turn (setImmediate), so a send
 *   sees another process's commit at most one turn late. A send's reads were never in its
 *   transaction (another daemon may commit between them and the group's commit, which may wait for
 *   the write lock for up to 5 s); the memo widens that window by at most the rest of one turn.
 */
import type Database from 'better-sqlite3';

export class TurnReads {
  private readonly memo = new Map<string, unknown>();
  private readonly totalChanges: Database.Statement;
  private changes = -1;
  private clearing = false;

  constructor(db: Database.Database) {
    this.totalChanges = db.prepare('SELECT total_changes()').pluck();
  }

  /** `read()`'s value, from this turn's memo when nothing this connection wrote since changed it. */
  get<T>(key: string, read: () => T): T {
    const changes = this.totalChanges.get() as number;
    if (changes !== this.changes) {
      this.memo.clear();
      this.changes = changes;
    }
    if (this.memo.has(key)) return this.memo.get(key) as T;
    const value = read();
    this.memo.set(key, value);
    if (!this.clearing) {
      this.clearing = true;
      setImmediate(() => {
        this.clearing = false;
        this.memo.clear();
      });
    }
    return value;
  }
}

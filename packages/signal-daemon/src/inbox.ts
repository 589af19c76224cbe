import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Envelope, ReceiveParams } from '@vigil/shared-types';
import type Database from 'better-sqlite3';

/** One stored incoming message: its sequence number and the JSON of its `receive` params. */
export interface InboxEvent {
  readonly seq: number;
  /** `{"envelope":…,"account":…}`, serialized once when stored. */
  readonly json: string;
  readonly receivedAt: number;
}

export interface Retention {
  readonly hours: number;
  readonly messages: number;
}

const RING_SIZE = 4096;

/**
 * The daemon's durable inbox: every incoming envelope is stored here, in order, with a sequence
 * number, before anything is told of it. SSE clients replay from it by sequence number
 * (Last-Event-ID), also after a restart. The newest events are also kept in memory so that
 * live readers do not touch the database.
 *
 * Event ids are `EPOCH.SEQ`: the epoch is fixed when the inbox is created, so a client that comes
 * back with an id from an inbox that has since been deleted gets everything retained rather than
 * nothing.
 */
export class Inbox extends EventEmitter<{ appended: [head: number]; replay: [missed: number] }> {
  readonly epoch: string;
  private headSeq: number;
  private ring: InboxEvent[] = [];
  private readonly stmts;

  constructor(
    private readonly db: Database.Database,
    readonly account: string,
    private readonly retention: Retention,
  ) {
    super();
    this.setMaxListeners(0);
    db.exec(`
      CREATE TABLE IF NOT EXISTS inbox (
        account TEXT NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, received_at INTEGER NOT NULL,
        PRIMARY KEY (account, seq)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS inbox_head (
        account TEXT PRIMARY KEY, epoch TEXT NOT NULL, seq INTEGER NOT NULL);
    `);
    db.prepare('INSERT OR IGNORE INTO inbox_head (account, epoch, seq) VALUES (?, ?, 0)').run(
      account,
      randomBytes(6).toString('hex'),
    );
    const head = db.prepare('SELECT epoch, seq FROM inbox_head WHERE account = ?').get(account) as {
      epoch: string;
      seq: number;
    };
    this.epoch = head.epoch;
    this.headSeq = head.seq;
    this.stmts = {
      insert: db.prepare('INSERT INTO inbox (account, seq, json, received_at) VALUES (?, ?, ?, ?)'),
      setHead: db.prepare('UPDATE inbox_head SET seq = ? WHERE account = ?'),
      readHead: db.prepare('SELECT seq FROM inbox_head WHERE account = ?').pluck(),
      after: db.prepare(
        'SELECT seq, json, received_at AS receivedAt FROM inbox WHERE account = ? AND seq > ? ORDER BY seq LIMIT ?',
      ),
      pruneAge: db.prepare('DELETE FROM inbox WHERE account = ? AND received_at < ?'),
      pruneCount: db.prepare('DELETE FROM inbox WHERE account = ? AND seq <= ?'),
      count: db.prepare('SELECT COUNT(*) FROM inbox WHERE account = ?').pluck(),
    };
  }

  /** The sequence number of the newest stored event (0 when none yet). */
  get head(): number {
    return this.headSeq;
  }

  /**
   * Stores envelopes in one transaction, together with `alsoInTransaction` (the local backend
   * removes them from the network's mailbox there, so a message is in exactly one of the two at
   * every instant). Listeners hear of them only after the commit.
   */
  append(envelopes: readonly Envelope[], alsoInTransaction?: () => void): InboxEvent[] {
    if (envelopes.length === 0 && !alsoInTransaction) return [];
    const now = Date.now();
    const stored: InboxEvent[] = [];
    this.db
      .transaction(() => {
        // Read the head inside the transaction: correct even if another process shares the file.
        let seq = this.stmts.readHead.get(this.account) as number;
        for (const envelope of envelopes) {
          seq += 1;
          const params: ReceiveParams = { envelope, account: this.account };
          const json = JSON.stringify(params);
          this.stmts.insert.run(this.account, seq, json, now);
          stored.push({ seq, json, receivedAt: now });
        }
        if (stored.length > 0) this.stmts.setHead.run(seq, this.account);
        alsoInTransaction?.();
      })
      .immediate();
    if (stored.length > 0) {
      this.headSeq = stored[stored.length - 1]!.seq;
      this.ring.push(...stored);
      if (this.ring.length > RING_SIZE) this.ring.splice(0, this.ring.length - RING_SIZE);
      this.emit('appended', this.headSeq);
    }
    return stored;
  }

  /** Up to `limit` events after `seq`, oldest first. */
  after(seq: number, limit = 256): InboxEvent[] {
    if (seq >= this.headSeq) return [];
    const first = this.ring[0];
    if (first && seq >= first.seq - 1) {
      const start = seq - first.seq + 1;
      return this.ring.slice(start, start + limit);
    }
    return this.stmts.after.all(this.account, seq, limit) as InboxEvent[];
  }

  /** The SSE id of an event. */
  eventId(seq: number): string {
    return `${this.epoch}.${seq}`;
  }

  /**
   * The sequence number to replay after, from a Last-Event-ID: `EPOCH.SEQ` from this inbox, or a
   * bare number. An id from another epoch (the inbox was recreated) replays everything retained.
   */
  cursorFrom(lastEventId: string | undefined): number {
    if (lastEventId === undefined || lastEventId.trim() === '') return this.headSeq;
    const m = /^(?:([0-9a-f]+)\.)?(\d{1,15})$/.exec(lastEventId.trim());
    if (!m) return this.headSeq;
    const cursor = m[1] !== undefined && m[1] !== this.epoch ? 0 : Math.min(Number(m[2]), this.headSeq);
    // A reader that comes back having missed messages (counted by the metrics).
    if (cursor < this.headSeq) this.emit('replay', this.headSeq - cursor);
    return cursor;
  }

  /** Drops events older than the retention period and beyond the retained count. */
  prune(now = Date.now()): number {
    const byAge = this.stmts.pruneAge.run(this.account, now - this.retention.hours * 3_600_000).changes;
    const byCount = this.stmts.pruneCount.run(this.account, this.headSeq - this.retention.messages).changes;
    const dropped = byAge + byCount;
    if (dropped > 0) {
      const firstKept = this.ring.findIndex((e) => e.receivedAt >= now - this.retention.hours * 3_600_000);
      this.ring = firstKept < 0 ? [] : this.ring.slice(firstKept);
      this.ring = this.ring.filter((e) => e.seq > this.headSeq - this.retention.messages);
    }
    return dropped;
  }

  get size(): number {
    return this.stmts.count.get(this.account) as number;
  }
}

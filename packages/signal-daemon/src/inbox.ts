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

/**
 * Held messages: what arrived while no consumer was connected is given to the next consumer that
 * connects without Last-Event-ID, at most `messages` of them and none older than `hours`.
 */
export interface Hold {
  readonly enabled: boolean;
  readonly hours: number;
  readonly messages: number;
}

export const DEFAULT_HOLD: Hold = { enabled: true, hours: 24 * 7, messages: 10_000 };

const RING_SIZE = 4096;
/** The delivered mark is written to the database at most this often while consumers read. */
const MARK_WRITE_MS = 250;
/** A consumer gone within this time, with nobody else connected, is a probe: what it was written is held again. */
export const HOLD_GRACE_MS = 1000;

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
  /** Everything up to this sequence number was written to a consumer. */
  private deliveredSeq: number;
  private markWritten: number;
  private markTimer: NodeJS.Timeout | null = null;
  private consumers = 0;
  private closed = false;

  constructor(
    private readonly db: Database.Database,
    readonly account: string,
    private readonly retention: Retention,
    readonly hold: Hold = DEFAULT_HOLD,
  ) {
    super();
    this.setMaxListeners(0);
    db.exec(`
      CREATE TABLE IF NOT EXISTS inbox (
        account TEXT NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, received_at INTEGER NOT NULL,
        PRIMARY KEY (account, seq)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS inbox_head (
        account TEXT PRIMARY KEY, epoch TEXT NOT NULL, seq INTEGER NOT NULL,
        delivered INTEGER NOT NULL DEFAULT 0);
    `);
    const columns = db.prepare('PRAGMA table_info(inbox_head)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'delivered')) {
      // An inbox from before held messages: what it holds counts as given (no flood at the upgrade).
      db.transaction(() => {
        db.exec('ALTER TABLE inbox_head ADD COLUMN delivered INTEGER NOT NULL DEFAULT 0');
        db.exec('UPDATE inbox_head SET delivered = seq');
      }).immediate();
    }
    db.prepare('INSERT OR IGNORE INTO inbox_head (account, epoch, seq) VALUES (?, ?, 0)').run(
      account,
      randomBytes(6).toString('hex'),
    );
    const head = db.prepare('SELECT epoch, seq, delivered FROM inbox_head WHERE account = ?').get(account) as {
      epoch: string;
      seq: number;
      delivered: number;
    };
    this.epoch = head.epoch;
    this.headSeq = head.seq;
    this.deliveredSeq = Math.min(head.delivered, head.seq);
    this.markWritten = this.deliveredSeq;
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
      setDelivered: db.prepare('UPDATE inbox_head SET delivered = ? WHERE account = ?'),
      firstSince: db
        .prepare('SELECT seq FROM inbox WHERE account = ? AND seq > ? AND received_at >= ? ORDER BY seq LIMIT 1')
        .pluck(),
    };
  }

  // ---- held messages ----------------------------------------------------------------------

  /**
   * Where a consumer that connects without Last-Event-ID starts: after the last message written to
   * a consumer, so that what arrived while none was connected is given now, in order (bounded by
   * the hold's age and count); at the present when holding is off.
   */
  heldStart(now = Date.now()): number {
    if (!this.hold.enabled || this.deliveredSeq >= this.headSeq) return this.headSeq;
    const from = Math.max(this.deliveredSeq, this.headSeq - this.hold.messages);
    const first = this.stmts.firstSince.get(this.account, from, now - this.hold.hours * 3_600_000) as
      | number
      | undefined;
    return first === undefined ? this.headSeq : first - 1;
  }

  /** The messages held for the next consumer. */
  get held(): number {
    return this.headSeq - this.heldStart();
  }

  /** A consumer wrote everything up to `seq`: it is not given again to one that connects later. */
  markDelivered(seq: number): void {
    if (seq <= this.deliveredSeq) return;
    this.deliveredSeq = Math.min(seq, this.headSeq);
    this.markTimer ??= setTimeout(() => this.flushMark(), MARK_WRITE_MS);
    this.markTimer.unref?.();
  }

  /** Writes the delivered mark now (when the last consumer leaves, and at close). */
  flushMark(): void {
    if (this.markTimer) clearTimeout(this.markTimer);
    this.markTimer = null;
    if (this.closed || this.markWritten === this.deliveredSeq) return;
    try {
      this.stmts.setDelivered.run(this.deliveredSeq, this.account);
      this.markWritten = this.deliveredSeq;
    } catch {
      // The file is busy (another daemon writes it): tried again shortly.
      this.markTimer = setTimeout(() => this.flushMark(), MARK_WRITE_MS);
      this.markTimer.unref?.();
    }
  }

  /** Writes the delivered mark; the database is not touched again (it closes with the backend). */
  close(): void {
    this.flushMark();
    this.closed = true;
  }

  /** A consumer (an SSE stream, a TCP connection receiving notifications); `close` when it goes. */
  consumer(): HoldConsumer {
    this.consumers++;
    const markAtStart = this.deliveredSeq;
    const openedAt = Date.now();
    return new HoldConsumer(this, () => {
      this.consumers--;
      // A probe (gone within the grace, nobody else connected) takes nothing away: what it was
      // written is held again for the next consumer.
      if (this.consumers === 0 && Date.now() - openedAt < HOLD_GRACE_MS && this.deliveredSeq > markAtStart) {
        this.deliveredSeq = markAtStart;
      }
      if (this.consumers === 0) this.flushMark();
    });
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
   * bare number; without one, where the held messages start (see heldStart). An id from another epoch (the inbox was recreated) replays everything retained.
   */
  cursorFrom(lastEventId: string | undefined): number {
    if (lastEventId === undefined || lastEventId.trim() === '') return this.heldStart();
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

/** One consumer's part in held messages: it tells the inbox what it was written. */
export class HoldConsumer {
  private closed = false;

  constructor(
    private readonly inbox: Inbox,
    private readonly onClose: () => void,
  ) {}

  /** Everything up to `seq` was written to this consumer. */
  wrote(seq: number): void {
    this.inbox.markDelivered(seq);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

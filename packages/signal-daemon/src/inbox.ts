import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Envelope } from '@vigil/shared-types';
import type Database from 'better-sqlite3';
import { type ConsumerHandle, ConsumerMarks } from './consumers.js';
import {
  type ConsumerState,
  DEFAULT_HOLD,
  type Hold,
  type InboxEvent,
  migrate,
  type Retention,
} from './inbox-schema.js';
import { BUSY_TIMEOUT_MS } from './sqlite.js';
import { LockedWriter } from './writes.js';

export { type ConsumerState, DEFAULT_HOLD, type Hold, type InboxEvent, type Retention };

/** The newest events kept in memory for live readers: at most this many (plus RING_SLACK)... */
const RING_SIZE = 4096;
const RING_SLACK = 1024;
/** ...and this many bytes of JSON (an event larger than this is read from the file). */
const RING_BYTES = 16 * 1024 * 1024;

/**
 * Events deleted by one step of the retention: one statement, a few ms of the file's write lock
 * at most, so that a large backlog (a lowered retention, a minute of traffic at full rate) is cut
 * in many short writes with the event loop free between them, never in one long delete.
 */
export const INBOX_PRUNE_BATCH = 1000;

/**
 * Runs a write to the inbox's file. By default through a LockedWriter: while another connection
 * holds the file's write lock (its checkpointer's restart of the WAL, a tool), the event loop goes
 * on instead of sleeping in SQLite's busy wait.
 */
export type InboxWrite = (fn: () => void) => Promise<void>;

/**
 * The daemon's durable inbox: every incoming envelope is stored here, in order, with a sequence
 * number, before anything is told of it. SSE clients replay from it by sequence number
 * (Last-Event-ID), also after a restart; each consumer has its own durable mark (see consumers.ts).
 * The newest events are also kept in memory (bounded in count and bytes) so that live readers do
 * not touch the database.
 *
 * Event ids are `EPOCH.SEQ`: the epoch is fixed when the inbox is created, so a client that comes
 * back with an id from an inbox that has since been deleted gets everything retained rather than
 * nothing.
 */
export class Inbox extends EventEmitter<{ appended: [head: number]; replay: [missed: number] }> {
  readonly epoch: string;
  private headSeq: number;
  private ring: InboxEvent[] = [];
  private ringBytes = 0;
  /** Bytes of JSON stored for this account. */
  private storedBytes: number;
  private readonly stmts;
  readonly marks: ConsumerMarks;
  /** The account as a JSON string, for the events' JSON. */
  private readonly accountJson: string;
  /** A transaction running its argument, made once (append's, not one per append). */
  private readonly transaction: Database.Transaction<(fn: () => void) => void>;
  /** Runs a write (see InboxWrite): `append` within it waits for the write lock without blocking. */
  readonly write: InboxWrite;
  /** The pass of the retention under way, if any (one at a time). */
  private pruning: Promise<number> | null = null;
  /** The count bound's cut when the last pass started: the next starts once the head is a batch past it. */
  private prunedThrough = 0;

  constructor(
    /** Its file (the daemon closes it after the backend). */
    readonly db: Database.Database,
    readonly account: string,
    private readonly retention: Retention,
    readonly hold: Hold = DEFAULT_HOLD,
    write?: InboxWrite,
  ) {
    super();
    this.setMaxListeners(0);
    const writer = new LockedWriter(db, BUSY_TIMEOUT_MS);
    this.write = write ?? ((fn) => writer.write(fn));
    this.accountJson = JSON.stringify(account);
    this.transaction = db.transaction((fn: () => void) => fn());
    migrate(db);
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
    this.stmts = {
      insert: db.prepare('INSERT INTO inbox (account, seq, json, received_at, bytes) VALUES (?, ?, ?, ?, ?)'),
      setHead: db.prepare('UPDATE inbox_head SET seq = ? WHERE account = ?'),
      readHead: db.prepare('SELECT seq FROM inbox_head WHERE account = ?').pluck(),
      after: db.prepare(
        'SELECT seq, json, received_at AS receivedAt FROM inbox WHERE account = ? AND seq > ? ORDER BY seq LIMIT ?',
      ),
      oldest: db.prepare('SELECT seq, received_at FROM inbox WHERE account = ? ORDER BY seq LIMIT 1').raw(),
      // The seq of the last of the oldest batch (the offset is the batch's size less one).
      batchEnd: db.prepare('SELECT seq FROM inbox WHERE account = ? ORDER BY seq LIMIT 1 OFFSET ?').pluck(),
      oldestBytes: db.prepare('SELECT seq, bytes FROM inbox WHERE account = ? ORDER BY seq LIMIT ?').raw(),
      // Within the oldest batch (seq <= ?): past the count or bytes cut, or older than the period.
      pruneBytes: db
        .prepare(
          'SELECT COALESCE(SUM(bytes), 0) FROM inbox WHERE account = ? AND seq <= ? AND (seq <= ? OR received_at < ?)',
        )
        .pluck(),
      prune: db.prepare('DELETE FROM inbox WHERE account = ? AND seq <= ? AND (seq <= ? OR received_at < ?)'),
      count: db.prepare('SELECT COUNT(*) FROM inbox WHERE account = ?').pluck(),
      bytes: db.prepare('SELECT COALESCE(SUM(bytes), 0) FROM inbox WHERE account = ?').pluck(),
      // The first held message after a mark: newest `messages`, `bytes` in all, not older than a time.
      firstHeld: db.prepare(
        `SELECT seq, received_at AS receivedAt FROM (
           SELECT seq, received_at, SUM(bytes) OVER (ORDER BY seq DESC) AS total FROM inbox
           WHERE account = ? AND seq > ? AND received_at >= ?)
         WHERE total <= ? ORDER BY seq LIMIT 1`,
      ),
      setFloor: db.prepare('UPDATE inbox_head SET delivered = ? WHERE account = ?'),
    };
    this.storedBytes = this.stmts.bytes.get(account) as number;
    this.marks = new ConsumerMarks(db, account, Math.min(head.delivered, head.seq), (seq) =>
      this.stmts.setFloor.run(seq, account),
    );
  }

  // ---- held messages ----------------------------------------------------------------------

  /** The first message held for `consumer` (its seq and arrival), or null when none is. */
  private firstHeld(consumer: string, now: number, evenOff = false): { seq: number; receivedAt: number } | null {
    const mark = this.marks.mark(consumer);
    if ((!this.hold.enabled && !evenOff) || mark >= this.headSeq) return null;
    const from = Math.max(mark, this.headSeq - this.hold.messages);
    const first = this.stmts.firstHeld.get(this.account, from, now - this.hold.hours * 3_600_000, this.hold.bytes) as
      | { seq: number; receivedAt: number }
      | undefined;
    return first ?? null;
  }

  /**
   * Where `consumer` starts when it connects without Last-Event-ID: after the last message written
   * to it, so that what arrived since is given now, in order (bounded by the hold's age, count and
   * bytes); at the present when holding is off.
   */
  heldStart(consumer: string, now = Date.now()): number {
    const first = this.firstHeld(consumer, now);
    return first === null ? this.headSeq : first.seq - 1;
  }

  /**
   * Where a `receive` poll of `consumer` starts: after its mark, within the hold's bounds, also
   * with holding off (a poller gets what arrived between its polls: that is what polling means).
   */
  pollStart(consumer: string, now = Date.now()): number {
    const first = this.firstHeld(consumer, now, true);
    return first === null ? this.headSeq : first.seq - 1;
  }

  /** The messages held for `consumer`. */
  held(consumer: string): number {
    return this.headSeq - this.heldStart(consumer);
  }

  /** A connection of `consumer` opens (an SSE stream, a TCP connection receiving); `close` it when it goes. */
  consumer(name: string, probe = true): ConsumerHandle {
    return this.marks.open(name, this.headSeq, probe);
  }

  /**
   * Each consumer seen within the hold's period, connected or not, and each of `always` (seen or
   * not yet), with what is held for it.
   */
  consumerStates(always: readonly string[] = [], now = Date.now()): ConsumerState[] {
    const seen = this.marks.list();
    const unseen = always
      .filter((name) => !seen.some((c) => c.name === name))
      .map((name) => ({ name, connections: 0, seenAt: null }));
    return [...seen, ...unseen].map((c) => {
      const first = this.firstHeld(c.name, now);
      return {
        name: c.name,
        connections: c.connections,
        held: first === null ? 0 : this.headSeq - first.seq + 1,
        oldestHeldAgeS: first === null ? null : Math.max(0, Math.round((now - first.receivedAt) / 1000)),
        lastSeenAt: c.seenAt,
      };
    });
  }

  /** Writes the consumers' marks; the database is not touched again (it closes after the backend). */
  close(): void {
    this.marks.close();
  }

  /** The sequence number of the newest stored event (0 when none yet). */
  get head(): number {
    return this.headSeq;
  }

  /**
   * Stores envelopes in one transaction, together with `alsoInTransaction` (the local backend
   * records there how far it has read its mailbox, so a message is stored exactly once).
   * Listeners hear of them only after the commit. `envelopeJson[i]`, when given, is
   * `JSON.stringify(envelopes[i])` made already (the local network's mail is stored as JSON): the
   * stored event (ReceiveParams) is built around it instead of serialising the envelope again.
   */
  append(
    envelopes: readonly Envelope[],
    alsoInTransaction?: () => void,
    envelopeJson?: readonly string[],
  ): InboxEvent[] {
    if (envelopes.length === 0 && !alsoInTransaction) return [];
    const now = Date.now();
    const stored: InboxEvent[] = [];
    this.transaction.immediate(() => {
      // Read the head inside the transaction: correct even if another process shares the file.
      let seq = this.stmts.readHead.get(this.account) as number;
      for (const [i, envelope] of envelopes.entries()) {
        seq += 1;
        // The JSON of ReceiveParams, { envelope, account }, as JSON.stringify writes it.
        const json = `{"envelope":${envelopeJson?.[i] ?? JSON.stringify(envelope)},"account":${this.accountJson}}`;
        const bytes = Buffer.byteLength(json);
        this.stmts.insert.run(this.account, seq, json, now, bytes);
        stored.push({ seq, json, receivedAt: now, bytes });
      }
      if (stored.length > 0) this.stmts.setHead.run(seq, this.account);
      alsoInTransaction?.();
    });
    if (stored.length > 0) {
      this.headSeq = stored[stored.length - 1]!.seq;
      for (const e of stored) this.remember(e);
      // Over the bytes bound: one step now (it removes what pushed the inbox over, unless that is
      // more than a batch of events); if the file's lock is taken meanwhile, a pass soon, as when
      // the head is a batch past the count bound.
      let soon = this.headSeq - this.retention.messages > this.prunedThrough + INBOX_PRUNE_BATCH;
      try {
        if (this.storedBytes > this.retention.bytes) this.pruneStep(now);
      } catch {
        soon = true;
      }
      if (soon) setImmediate(() => void this.prune().catch(() => {}));
      this.emit('appended', this.headSeq);
    }
    return stored;
  }

  /** Keeps a new event in memory: the newest RING_SIZE (+ RING_SLACK), RING_BYTES in all (a larger one is not kept). */
  private remember(e: InboxEvent): void {
    this.storedBytes += e.bytes;
    if (e.bytes > RING_BYTES) {
      this.ring = [];
      this.ringBytes = 0;
      return;
    }
    this.ring.push(e);
    this.ringBytes += e.bytes;
    // Trimmed to RING_SIZE only once it is RING_SLACK over: one splice per RING_SLACK events,
    // not a shift of the whole ring at every one.
    if (this.ring.length <= RING_SIZE + RING_SLACK && this.ringBytes <= RING_BYTES) return;
    let drop = Math.max(0, this.ring.length - RING_SIZE);
    for (let i = 0; i < drop; i++) this.ringBytes -= this.ring[i]!.bytes;
    while (this.ringBytes > RING_BYTES) this.ringBytes -= this.ring[drop++]!.bytes;
    this.ring.splice(0, drop);
  }

  /**
   * Events after `seq`, oldest first: at most `limit` of them and, past the first, at most
   * `maxBytes` of JSON in all (the first is always given, whatever its size).
   */
  after(seq: number, limit = 256, maxBytes = 1024 * 1024): InboxEvent[] {
    if (seq >= this.headSeq) return [];
    const out: InboxEvent[] = [];
    let bytes = 0;
    const first = this.ring[0];
    if (first && seq >= first.seq - 1) {
      for (let i = seq - first.seq + 1; i < this.ring.length && out.length < limit; i++) {
        const e = this.ring[i]!;
        if (out.length > 0 && bytes + e.bytes > maxBytes) break;
        out.push(e);
        bytes += e.bytes;
      }
      return out;
    }
    // Rows are read one by one, so a batch of large messages is never all in memory at once.
    for (const row of this.stmts.after.iterate(this.account, seq, limit) as IterableIterator<
      Omit<InboxEvent, 'bytes'>
    >) {
      const size = Buffer.byteLength(row.json);
      if (out.length > 0 && bytes + size > maxBytes) break;
      out.push({ ...row, bytes: size });
      bytes += size;
    }
    return out;
  }

  /** The SSE id of an event. */
  eventId(seq: number): string {
    return `${this.epoch}.${seq}`;
  }

  /**
   * The sequence number to replay after, from a Last-Event-ID: `EPOCH.SEQ` from this inbox, or a
   * bare number; without one, where the held messages of `consumer` start (see heldStart). An id
   * from another epoch (the inbox was recreated) replays everything retained.
   */
  cursorFrom(lastEventId: string | undefined, consumer: string): number {
    if (lastEventId === undefined || lastEventId.trim() === '') return this.heldStart(consumer);
    const m = /^(?:([0-9a-f]+)\.)?(\d{1,15})$/.exec(lastEventId.trim());
    if (!m) return this.headSeq;
    const cursor = m[1] !== undefined && m[1] !== this.epoch ? 0 : Math.min(Number(m[2]), this.headSeq);
    // A reader that comes back having missed messages (counted by the metrics).
    if (cursor < this.headSeq) this.emit('replay', this.headSeq - cursor);
    return cursor;
  }

  /**
   * One pass of the retention: drops events older than the retention period, beyond the retained
   * count and beyond the retained bytes (the oldest first), in steps of at most INBOX_PRUNE_BATCH
   * events, each its own write, with a yield to the event loop between them; then forgets
   * consumers not seen for the hold's period. Resolves to the number dropped; a pass asked for
   * while one runs is that one.
   */
  prune(now = Date.now()): Promise<number> {
    this.pruning ??= (async () => {
      let dropped = 0;
      // Noted at the start: a pass that fails (the file's lock held past the busy timeout) is tried
      // again by arrivals only once the head is another batch past the bound, not at every one.
      this.prunedThrough = this.headSeq - this.retention.messages;
      try {
        for (;;) {
          let n = 0;
          await this.write(() => {
            n = this.pruneStep(now);
          });
          dropped += n;
          if (n < INBOX_PRUNE_BATCH) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        this.marks.forget(now - this.hold.hours * 3_600_000);
        return dropped;
      } finally {
        this.pruning = null;
      }
    })();
    return this.pruning;
  }

  /**
   * One step: deletes, among the oldest INBOX_PRUNE_BATCH events, those past a bound; how many.
   * Runs inside a write (the caller's transaction, or a statement of its own).
   */
  private pruneStep(now: number): number {
    const since = now - this.retention.hours * 3_600_000;
    const countCut = this.headSeq - this.retention.messages;
    const oldest = this.stmts.oldest.get(this.account) as [number, number] | undefined;
    const overBytes = this.storedBytes - this.retention.bytes;
    if (!oldest || (oldest[0] > countCut && oldest[1] >= since && overBytes <= 0)) return 0;
    // The oldest batch's last seq bounds the step; the bytes cut is where the excess is covered.
    const upTo = (this.stmts.batchEnd.get(this.account, INBOX_PRUNE_BATCH - 1) as number | undefined) ?? this.headSeq;
    let bytesCut = 0;
    if (overBytes > 0) {
      let excess = overBytes;
      for (const [seq, bytes] of this.stmts.oldestBytes.iterate(this.account, INBOX_PRUNE_BATCH) as Iterable<
        [number, number]
      >) {
        bytesCut = seq;
        excess -= bytes;
        if (excess <= 0) break;
      }
    }
    const cut = Math.max(countCut, bytesCut);
    this.storedBytes -= this.stmts.pruneBytes.get(this.account, upTo, cut, since) as number;
    const dropped = this.stmts.prune.run(this.account, upTo, cut, since).changes;
    const first = this.ring[0];
    if (dropped > 0 && first && first.seq <= upTo) {
      const kept = this.ring.filter((e) => e.seq > upTo || (e.seq > cut && e.receivedAt >= since));
      this.ring = kept;
      this.ringBytes = kept.reduce((n, e) => n + e.bytes, 0);
    }
    return dropped;
  }

  /** Bytes of JSON stored for this account. */
  get bytes(): number {
    return this.storedBytes;
  }

  get size(): number {
    return this.stmts.count.get(this.account) as number;
  }
}

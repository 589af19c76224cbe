import type Database from 'better-sqlite3';

/**
 * Consumers of incoming messages and their durable marks, as durable subscriptions in a message
 * broker: each named consumer has its own mark (the last message written to it), kept in the inbox
 * file, so one that reconnects without Last-Event-ID gets what arrived since *its* last read,
 * whatever the others read meanwhile. Several connections of one consumer share its mark.
 */

/** The consumer an SSE stream is when it names none. */
export const SSE_CONSUMER = 'sse';
/** The consumer a TCP `subscribeReceive` is when it names none. */
export const TCP_CONSUMER = 'tcp';
/** The consumer every TCP connection from a relay source address is (the VM consumer). */
export const RELAY_CONSUMER = 'relay';
/** The consumer a `receive` poll is when it names none. */
export const POLL_CONSUMER = 'poll';
export const BUILTIN_CONSUMERS: readonly string[] = [SSE_CONSUMER, TCP_CONSUMER, RELAY_CONSUMER, POLL_CONSUMER];

/** A consumer name: a letter or digit, then letters, digits, `.`, `_`, `-`; at most 64 in all. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Why `name` is no acceptable consumer name (null when it is one of `known`). */
export function consumerNameError(name: unknown, known: ReadonlySet<string>): string | null {
  if (typeof name !== 'string') return 'consumer must be a string';
  if (name.length > 64) return 'consumer name too long (at most 64 characters)';
  if (!NAME.test(name)) {
    return 'consumer name must be letters, digits, ".", "_" or "-", starting with a letter or digit';
  }
  if (!known.has(name)) {
    return `unknown consumer "${name}" (known: ${[...known].join(', ')}; declare more with --consumer)`;
  }
  return null;
}

/** A mark is written to the database at most this often while consumers read. */
const MARK_WRITE_MS = 250;
/** A connection gone within this time, with no other of its consumer open, is a probe: what it was written is held again. */
export const HOLD_GRACE_MS = 1000;

interface Mark {
  seq: number;
  written: number;
  seenAt: number;
  /** seenAt changed (a connection opened or closed) since it was written. */
  seenDirty: boolean;
  connections: number;
}

/** The consumer's marks of one account's inbox; in memory, written to the database in the background. */
export class ConsumerMarks {
  private readonly marks = new Map<string, Mark>();
  private readonly stmts;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  /**
   * @param floor where a consumer never seen before starts: after the last message written to any
   * consumer (what none has read is held for it).
   */
  constructor(
    private readonly db: Database.Database,
    private readonly account: string,
    private floor: number,
    private readonly setFloor: (seq: number) => void,
  ) {
    // Its table is the inbox's (inbox-schema.ts).
    this.floorWritten = floor;
    this.stmts = {
      upsert: db.prepare(
        `INSERT INTO inbox_consumer (account, name, mark, seen_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (account, name) DO UPDATE SET mark = excluded.mark, seen_at = excluded.seen_at`,
      ),
      forget: db.prepare('DELETE FROM inbox_consumer WHERE account = ? AND name = ?'),
    };
    const rows = db
      .prepare('SELECT name, mark, seen_at AS seenAt FROM inbox_consumer WHERE account = ?')
      .all(account) as { name: string; mark: number; seenAt: number }[];
    for (const r of rows)
      this.marks.set(r.name, { seq: r.mark, written: r.mark, seenAt: r.seenAt, seenDirty: false, connections: 0 });
    this.writeAll = db.transaction((now: number) => {
      for (const [name, m] of this.marks) {
        if (m.written === m.seq && !m.seenDirty) continue;
        if (m.connections > 0) m.seenAt = now;
        this.stmts.upsert.run(this.account, name, m.seq, m.seenAt);
        m.written = m.seq;
        m.seenDirty = false;
      }
      if (this.floorWritten !== this.floor) {
        this.setFloor(this.floor);
        this.floorWritten = this.floor;
      }
    });
  }

  private readonly writeAll: (now: number) => void;
  private floorWritten: number;

  /** The consumer's mark: the last message written to it (the floor for one never seen). */
  mark(name: string): number {
    return this.marks.get(name)?.seq ?? this.floor;
  }

  /**
   * A connection of `name` opens; `close` it when it goes. `probe`: one gone within HOLD_GRACE_MS
   * gives back what it was written (a `receive` poll is no probe: what it returned is taken).
   */
  open(name: string, head: number, probe = true): ConsumerHandle {
    let m = this.marks.get(name);
    if (!m) {
      m = { seq: Math.min(this.floor, head), written: -1, seenAt: Date.now(), seenDirty: true, connections: 0 };
      this.marks.set(name, m);
    }
    m.connections++;
    m.seenAt = Date.now();
    m.seenDirty = true;
    const markAtStart = m.seq;
    const floorAtStart = this.floor;
    const openedAt = Date.now();
    const mark = m;
    return new ConsumerHandle(
      name,
      (seq) => this.wrote(mark, seq),
      () => {
        mark.connections--;
        mark.seenAt = Date.now();
        // A probe (gone within the grace, no other connection of its consumer) takes nothing away.
        if (probe && mark.connections === 0 && Date.now() - openedAt < HOLD_GRACE_MS && mark.seq > markAtStart) {
          mark.seq = markAtStart;
          if (this.connected() === 0) this.floor = Math.max(floorAtStart, this.maxMark());
        }
        if (mark.connections === 0) this.flush();
      },
    );
  }

  private wrote(m: Mark, seq: number): void {
    if (seq <= m.seq) return;
    m.seq = seq;
    if (seq > this.floor) this.floor = seq;
    this.timer ??= setTimeout(() => this.flush(), MARK_WRITE_MS);
    this.timer.unref?.();
  }

  private connected(): number {
    let n = 0;
    for (const m of this.marks.values()) n += m.connections;
    return n;
  }

  private maxMark(): number {
    let max = 0;
    for (const m of this.marks.values()) max = Math.max(max, m.seq);
    return max;
  }

  /**
   * Writes the marks that moved now (when a consumer leaves, and at close). While serving, a file
   * whose write lock another process holds is not waited for (SQLite's busy wait would sleep on
   * the event loop, every stream of this daemon stopped, 14-17 ms seen under the bench's load):
   * the marks are tried again after MARK_WRITE_MS. At close (`wait`) the busy timeout applies.
   */
  flush(wait = false): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.closed) return;
    try {
      if (wait) this.writeAll(Date.now());
      else this.withoutBusyWait(() => this.writeAll(Date.now()));
    } catch {
      // The file is busy (another daemon writes it): tried again shortly.
      this.timer = setTimeout(() => this.flush(), MARK_WRITE_MS);
      this.timer.unref?.();
    }
  }

  /** Forgets the consumers not connected and not seen since `before` (ms since the epoch). */
  forget(before: number): string[] {
    const gone: string[] = [];
    for (const [name, m] of this.marks) {
      if (m.connections > 0 || m.seenAt >= before) continue;
      this.stmts.forget.run(this.account, name);
      this.marks.delete(name);
      gone.push(name);
    }
    return gone;
  }

  /** Each consumer known: its name, open connections, mark and when it was last seen. */
  list(): { name: string; connections: number; mark: number; seenAt: number }[] {
    return [...this.marks].map(([name, m]) => ({ name, connections: m.connections, mark: m.seq, seenAt: m.seenAt }));
  }

  close(): void {
    this.flush(true);
    this.closed = true;
  }

  private withoutBusyWait(fn: () => void): void {
    const timeout = this.db.pragma('busy_timeout', { simple: true }) as number;
    this.db.pragma('busy_timeout = 0');
    try {
      fn();
    } finally {
      this.db.pragma(`busy_timeout = ${timeout}`);
    }
  }
}

/** One connection's part in its consumer's mark. */
export class ConsumerHandle {
  private closed = false;

  constructor(
    readonly name: string,
    private readonly onWrote: (seq: number) => void,
    private readonly onClose: () => void,
  ) {}

  /** Everything up to `seq` was written to this connection. */
  wrote(seq: number): void {
    if (!this.closed) this.onWrote(seq);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

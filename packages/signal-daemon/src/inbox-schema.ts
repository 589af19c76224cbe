/**
 * The inbox's stored shapes and bounds, and its tables: created, and brought up to date from an
 * older file (inbox.ts uses them).
 */
import type Database from 'better-sqlite3';

/** One stored incoming message: its sequence number and the JSON of its `receive` params. */
export interface InboxEvent {
  readonly seq: number;
  /** `{"envelope":…,"account":…}`, serialized once when stored. */
  readonly json: string;
  readonly receivedAt: number;
  /** The size of `json` in bytes (UTF-8). */
  readonly bytes: number;
}

export interface Retention {
  readonly hours: number;
  readonly messages: number;
  /** The stored messages' JSON, in bytes, at most this much (the oldest go first). */
  readonly bytes: number;
}

/**
 * Held messages: what arrived since a consumer's last read is given to it when it connects without
 * Last-Event-ID, at most `messages` of them, `bytes` in all, and none older than `hours`.
 */
export interface Hold {
  readonly enabled: boolean;
  readonly hours: number;
  readonly messages: number;
  readonly bytes: number;
}

export const DEFAULT_HOLD: Hold = { enabled: true, hours: 24 * 7, messages: 10_000, bytes: 256 * 1024 * 1024 };

/** One consumer as /api/v1/check and the metrics show it. */
export interface ConsumerState {
  readonly name: string;
  /** Connections (streams, TCP connections) of this consumer open now. */
  readonly connections: number;
  /** Messages held for it: what it has not been written yet (within the hold's bounds). */
  readonly held: number;
  /** Age of the oldest of them in seconds; null when none. */
  readonly oldestHeldAgeS: number | null;
  /** When it was last connected (ms since the epoch); null: never. */
  readonly lastSeenAt: number | null;
}

/** Creates the inbox's tables, and brings an older file up to date. */
export function migrate(db: Database.Database): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS inbox (
      account TEXT NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, received_at INTEGER NOT NULL,
      bytes INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (account, seq)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS inbox_head (
      account TEXT PRIMARY KEY, epoch TEXT NOT NULL, seq INTEGER NOT NULL,
      delivered INTEGER NOT NULL DEFAULT 0);
    CREATE TABLE IF NOT EXISTS inbox_consumer (
      account TEXT NOT NULL, name TEXT NOT NULL, mark INTEGER NOT NULL, seen_at INTEGER NOT NULL,
      PRIMARY KEY (account, name)) WITHOUT ROWID;
  `);
  const has = (table: string, column: string) =>
    (db.prepare(`PRAGMA table_info(${table})`).all() as { name: string }[]).some((c) => c.name === column);
  if (!has('inbox_head', 'delivered')) {
    // An inbox from before held messages: what it holds counts as given (no flood at the upgrade).
    db.transaction(() => {
      db.exec('ALTER TABLE inbox_head ADD COLUMN delivered INTEGER NOT NULL DEFAULT 0');
      db.exec('UPDATE inbox_head SET delivered = seq');
    }).immediate();
  }
  if (!has('inbox', 'bytes')) {
    // An inbox from before byte bounds: each message's size is counted once.
    db.transaction(() => {
      db.exec('ALTER TABLE inbox ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0');
      db.exec('UPDATE inbox SET bytes = length(CAST(json AS BLOB))');
    }).immediate();
  }
  // Sizes and times without reading the messages (byte bounds, held counts).
  db.exec('CREATE INDEX IF NOT EXISTS inbox_sizes ON inbox (account, seq, bytes, received_at)');
}

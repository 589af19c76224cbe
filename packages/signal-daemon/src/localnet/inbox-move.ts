/**
 * Earlier versions kept the local backend's inbox in the local network's file (its tables
 * `inbox`, `inbox_head` and `inbox_consumer` there). The daemon's inbox is now a file of its own
 * (`inbox.sqlite` in the data directory, see mail-position.ts for why): at start, an inbox found in
 * the network file for this account is moved there once: copied in one transaction of the inbox
 * file, then removed from the network file. A stop between the two leaves the copy in the network
 * file, removed at the next start (the inbox file has the account's head by then: nothing is copied
 * twice). Its mail was removed from the mailbox as it was stored, so reading the mailbox from its
 * start delivers nothing twice.
 */
import { existsSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { migrate } from '../inbox-schema.js';

/** The inbox's tables, each with the columns copied. */
const TABLES = {
  inbox: 'account, seq, json, received_at, bytes',
  inbox_head: 'account, epoch, seq, delivered',
  inbox_consumer: 'account, name, mark, seen_at',
} as const;

/** Moves `account`'s inbox out of the network file into `db` (the inbox file); how many messages it held. */
export function adoptInbox(db: Database.Database, networkFile: string, account: string): number {
  if (!existsSync(networkFile)) return 0;
  migrate(db);
  db.prepare('ATTACH DATABASE ? AS net').run(networkFile);
  try {
    const has = (table: string) =>
      db.prepare("SELECT 1 FROM net.sqlite_master WHERE type = 'table' AND name = ?").get(table) !== undefined;
    const tables = (Object.keys(TABLES) as (keyof typeof TABLES)[]).filter(has);
    if (!tables.includes('inbox_head')) return 0;
    if (db.prepare('SELECT 1 FROM net.inbox_head WHERE account = ?').get(account) === undefined) return 0;
    let moved = 0;
    db.transaction(() => {
      if (db.prepare('SELECT 1 FROM main.inbox_head WHERE account = ?').get(account) !== undefined) return;
      for (const table of tables) {
        const columns = TABLES[table];
        const copied = db
          .prepare(`INSERT INTO main.${table} (${columns}) SELECT ${columns} FROM net.${table} WHERE account = ?`)
          .run(account).changes;
        if (table === 'inbox') moved = copied;
      }
    }).immediate();
    db.transaction(() => {
      for (const table of tables) db.prepare(`DELETE FROM net.${table} WHERE account = ?`).run(account);
    }).immediate();
    return moved;
  } finally {
    db.exec('DETACH DATABASE net');
  }
}

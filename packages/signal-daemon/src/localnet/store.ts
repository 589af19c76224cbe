import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Envelope } from '@vigil/shared-types';
import type Database from 'better-sqlite3';
import { openDatabase } from '../sqlite.js';

/**
 * The local network: one SQLite file (WAL) shared by every daemon of the user. It holds the
 * registered accounts, the mailboxes of messages not yet picked up, groups, contacts and blocks,
 * link requests and attachments. Daemons in different processes use it at the same time: every
 * write is a short IMMEDIATE transaction and readers wait up to `busy_timeout` for a writer.
 */

const SCHEMA_VERSION = 1;
const CHECKPOINT_MS = 1000;
const WAL_LIMIT_BYTES = 8 * 1024 * 1024;
const BUSY_TIMEOUT_MS = 5000;

/**
 * The checkpointer's thread: its own connection to the file, a PASSIVE checkpoint every second
 * and a TRUNCATE (waiting at most 10 ms for readers) once the WAL is over the limit. It ends when
 * told to, or with the process (the thread does not keep it alive).
 */
const CHECKPOINTER = `
const { workerData, parentPort } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 0');
const pageSize = db.pragma('page_size', { simple: true });
const timer = setInterval(() => {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)');
    if (r && r.log * pageSize > workerData.walLimit) {
      db.pragma('busy_timeout = 10');
      try { db.pragma('wal_checkpoint(TRUNCATE)'); } finally { db.pragma('busy_timeout = 0'); }
    }
  } catch {}
}, workerData.intervalMs);
parentPort.once('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

function startCheckpointer(file: string, fallback: () => void): { stop(): Promise<void> } {
  const inLoop = () => {
    const t = setInterval(fallback, CHECKPOINT_MS);
    t.unref();
    return { stop: async () => clearInterval(t) };
  };
  let worker: Worker;
  try {
    worker = new Worker(CHECKPOINTER, {
      eval: true,
      workerData: {
        file,
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        intervalMs: CHECKPOINT_MS,
        walLimit: WAL_LIMIT_BYTES,
      },
    });
  } catch {
    return inLoop();
  }
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  let local: { stop(): void } | null = null;
  let stopped = false;
  worker.once('error', () => {
    if (!stopped) local = inLoop();
  });
  return {
    // Resolves once the thread has closed its connection and exited: until then it may still
    // open the file (a thread slow to start creates it again after it was removed).
    stop: () => {
      stopped = true;
      local?.stop();
      worker.ref();
      worker.postMessage('stop');
      return exited;
    },
  };
}

const isBusy = (err: unknown) => String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY');

export interface AccountRow {
  readonly number: string;
  readonly uuid: string;
  readonly profileName: string;
}

export interface GroupRow {
  readonly id: string;
  readonly name: string;
  readonly description: string | null;
  readonly revision: number;
}

export interface GroupMember {
  readonly number: string;
  readonly uuid: string;
  readonly admin: boolean;
}

export interface LinkRow {
  readonly uuid: string;
  readonly pubKey: string;
  readonly requester: string;
  readonly deviceName: string | null;
  readonly primaryNumber: string | null;
  readonly createdAt: number;
  readonly acceptedAt: number | null;
}

export interface AttachmentRow {
  readonly id: string;
  readonly contentType: string;
  readonly filename: string | null;
  readonly data: Buffer;
}

export class NetworkStore {
  readonly db: Database.Database;
  private readonly s;

  private readonly checkpointer: { stop(): Promise<void> };
  private writesWaiting = 0;
  private writeQueue: Promise<void> = Promise.resolve();
  private readonly pageSize: number;

  constructor(readonly file: string) {
    this.db = openDatabase(file);
    this.pageSize = this.db.pragma('page_size', { simple: true }) as number;
    // Several daemons write this file all the time, so SQLite's automatic checkpoint rarely
    // completes and is retried, with fsyncs, at nearly every commit; and readers that never all
    // stop keep the WAL from ever starting over. Instead each daemon checkpoints once a second:
    // passively, and with a truncation (at most 10 ms of waiting for readers) once the WAL is large;
    // from a worker thread with a connection of its own, so that the checkpoint's page writes and
    // fsyncs (tens of ms) never stop the event loop. Where a worker cannot start, here.
    this.db.pragma('wal_autocheckpoint = 0');
    this.db.pragma(`journal_size_limit = ${WAL_LIMIT_BYTES}`);
    this.checkpointer = startCheckpointer(file, () => this.checkpoint());
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS accounts (
        number TEXT PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, profile_name TEXT NOT NULL,
        registered_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS mailbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT, recipient TEXT NOT NULL, envelope TEXT NOT NULL,
        created_at INTEGER NOT NULL);
      CREATE INDEX IF NOT EXISTS mailbox_by_recipient ON mailbox (recipient, id);
      CREATE TABLE IF NOT EXISTS contacts (
        owner TEXT NOT NULL, number TEXT NOT NULL, blocked INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (owner, number)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS groups (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT, revision INTEGER NOT NULL DEFAULT 0,
        created_by TEXT NOT NULL, created_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS group_members (
        group_id TEXT NOT NULL REFERENCES groups (id), number TEXT NOT NULL, admin INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (group_id, number)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS group_blocks (
        owner TEXT NOT NULL, group_id TEXT NOT NULL, PRIMARY KEY (owner, group_id)) WITHOUT ROWID;
      CREATE TABLE IF NOT EXISTS links (
        uuid TEXT PRIMARY KEY, pub_key TEXT NOT NULL, requester TEXT NOT NULL, device_name TEXT,
        primary_number TEXT, created_at INTEGER NOT NULL, accepted_at INTEGER);
      CREATE TABLE IF NOT EXISTS attachments (
        id TEXT PRIMARY KEY, content_type TEXT NOT NULL, filename TEXT, data BLOB NOT NULL,
        created_at INTEGER NOT NULL);
    `);
    this.db.prepare("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', ?)").run(String(SCHEMA_VERSION));
    const db = this.db;
    this.s = {
      account: db.prepare('SELECT number, uuid, profile_name AS profileName FROM accounts WHERE number = ?'),
      accounts: db.prepare('SELECT number, uuid, profile_name AS profileName FROM accounts ORDER BY number'),
      insertAccount: db.prepare(
        'INSERT INTO accounts (number, uuid, profile_name, registered_at) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (number) DO UPDATE SET profile_name = excluded.profile_name',
      ),
      post: db.prepare('INSERT INTO mailbox (recipient, envelope, created_at) VALUES (?, ?, ?)'),
      hasMail: db.prepare('SELECT 1 FROM mailbox WHERE recipient = ? LIMIT 1').pluck(),
      mail: db.prepare('SELECT id, envelope FROM mailbox WHERE recipient = ? ORDER BY id LIMIT ?'),
      deleteMailUpTo: db.prepare('DELETE FROM mailbox WHERE recipient = ? AND id <= ?'),
      contact: db.prepare('INSERT OR IGNORE INTO contacts (owner, number) VALUES (?, ?)'),
      setBlocked: db.prepare(
        'INSERT INTO contacts (owner, number, blocked) VALUES (?, ?, ?) ' +
          'ON CONFLICT (owner, number) DO UPDATE SET blocked = excluded.blocked',
      ),
      isBlocked: db.prepare('SELECT blocked FROM contacts WHERE owner = ? AND number = ?').pluck(),
      contacts: db.prepare('SELECT number, blocked FROM contacts WHERE owner = ? ORDER BY number'),
      group: db.prepare('SELECT id, name, description, revision FROM groups WHERE id = ?'),
      insertGroup: db.prepare(
        'INSERT INTO groups (id, name, description, revision, created_by, created_at) VALUES (?, ?, ?, 0, ?, ?)',
      ),
      updateGroup: db.prepare('UPDATE groups SET name = ?, description = ?, revision = revision + 1 WHERE id = ?'),
      members: db.prepare(
        'SELECT m.number, a.uuid, m.admin FROM group_members m JOIN accounts a ON a.number = m.number ' +
          'WHERE m.group_id = ? ORDER BY m.number',
      ),
      addMember: db.prepare(
        'INSERT INTO group_members (group_id, number, admin) VALUES (?, ?, ?) ' +
          'ON CONFLICT (group_id, number) DO UPDATE SET admin = MAX(admin, excluded.admin)',
      ),
      removeMember: db.prepare('DELETE FROM group_members WHERE group_id = ? AND number = ?'),
      setAdmin: db.prepare('UPDATE group_members SET admin = ? WHERE group_id = ? AND number = ?'),
      groupsOf: db.prepare(
        'SELECT g.id, g.name, g.description, g.revision FROM groups g ' +
          'JOIN group_members m ON m.group_id = g.id WHERE m.number = ? ORDER BY g.created_at, g.id',
      ),
      blockGroup: db.prepare('INSERT OR IGNORE INTO group_blocks (owner, group_id) VALUES (?, ?)'),
      unblockGroup: db.prepare('DELETE FROM group_blocks WHERE owner = ? AND group_id = ?'),
      isGroupBlocked: db.prepare('SELECT 1 FROM group_blocks WHERE owner = ? AND group_id = ?').pluck(),
      insertLink: db.prepare('INSERT INTO links (uuid, pub_key, requester, created_at) VALUES (?, ?, ?, ?)'),
      link: db.prepare(
        'SELECT uuid, pub_key AS pubKey, requester, device_name AS deviceName, primary_number AS primaryNumber, ' +
          'created_at AS createdAt, accepted_at AS acceptedAt FROM links WHERE uuid = ?',
      ),
      nameLink: db.prepare('UPDATE links SET device_name = ? WHERE uuid = ?'),
      acceptLink: db.prepare(
        'UPDATE links SET primary_number = ?, accepted_at = ? WHERE uuid = ? AND accepted_at IS NULL',
      ),
      devices: db.prepare(
        'SELECT uuid, requester, device_name AS deviceName, accepted_at AS acceptedAt FROM links ' +
          'WHERE primary_number = ? ORDER BY accepted_at',
      ),
      insertAttachment: db.prepare(
        'INSERT INTO attachments (id, content_type, filename, data, created_at) VALUES (?, ?, ?, ?, ?)',
      ),
      attachment: db.prepare('SELECT id, content_type AS contentType, filename, data FROM attachments WHERE id = ?'),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
    };
  }

  /** Registers (or re-registers) an account; its UUID is stable across restarts. */
  register(number: string, profileName: string): AccountRow {
    this.s.insertAccount.run(number, randomUUID(), profileName, Date.now());
    return this.account(number)!;
  }

  account(number: string): AccountRow | undefined {
    return this.s.account.get(number) as AccountRow | undefined;
  }

  accounts(): AccountRow[] {
    return this.s.accounts.all() as AccountRow[];
  }

  /**
   * Posts envelopes to mailboxes and records the recipients as the sender's contacts, all in one
   * transaction (one write lock per send: the file is shared with other daemons). Resolves once
   * committed; while another process holds the write lock it waits off the event loop (see
   * write), and posts commit in the order they were made.
   */
  post(sender: string, deliveries: readonly { recipient: string; envelope: Envelope }[]): Promise<void> {
    if (deliveries.length === 0) return Promise.resolve();
    const envelopes = deliveries.map((d) => JSON.stringify(d.envelope));
    return this.write(() => {
      const now = Date.now();
      this.db
        .transaction(() => {
          deliveries.forEach((d, i) => {
            this.s.post.run(d.recipient, envelopes[i], now);
            if (d.recipient !== sender) this.s.contact.run(sender, d.recipient);
          });
        })
        .immediate();
    });
  }

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
      this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  private async retryWrite(fn: () => void): Promise<void> {
    const deadline = Date.now() + BUSY_TIMEOUT_MS;
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

  hasMail(number: string): boolean {
    return this.s.hasMail.get(number) !== undefined;
  }

  /** The oldest mail of a recipient, with the id of the last one taken. */
  mail(number: string, limit: number): { envelopes: Envelope[]; lastId: number } {
    const rows = this.s.mail.all(number, limit) as { id: number; envelope: string }[];
    return {
      envelopes: rows.map((r) => JSON.parse(r.envelope) as Envelope),
      lastId: rows.length > 0 ? rows[rows.length - 1]!.id : 0,
    };
  }

  deleteMailUpTo(number: string, lastId: number): void {
    this.s.deleteMailUpTo.run(number, lastId);
  }

  addContact(owner: string, number: string): void {
    if (owner !== number) this.s.contact.run(owner, number);
  }

  setBlocked(owner: string, number: string, blocked: boolean): void {
    this.s.setBlocked.run(owner, number, blocked ? 1 : 0);
  }

  isBlocked(owner: string, number: string): boolean {
    return this.s.isBlocked.get(owner, number) === 1;
  }

  contacts(owner: string): { number: string; blocked: boolean }[] {
    return (this.s.contacts.all(owner) as { number: string; blocked: number }[]).map((r) => ({
      number: r.number,
      blocked: r.blocked === 1,
    }));
  }

  group(id: string): GroupRow | undefined {
    return this.s.group.get(id) as GroupRow | undefined;
  }

  members(groupId: string): GroupMember[] {
    return (this.s.members.all(groupId) as { number: string; uuid: string; admin: number }[]).map((m) => ({
      number: m.number,
      uuid: m.uuid,
      admin: m.admin === 1,
    }));
  }

  groupsOf(number: string): GroupRow[] {
    return this.s.groupsOf.all(number) as GroupRow[];
  }

  createGroup(id: string, name: string, description: string | null, creator: string, members: readonly string[]): void {
    this.db
      .transaction(() => {
        this.s.insertGroup.run(id, name, description, creator, Date.now());
        this.s.addMember.run(id, creator, 1);
        for (const m of members) if (m !== creator) this.s.addMember.run(id, m, 0);
      })
      .immediate();
  }

  changeGroup(
    id: string,
    change: {
      name: string;
      description: string | null;
      add: readonly string[];
      remove: readonly string[];
      admins: readonly string[];
      removeAdmins: readonly string[];
    },
  ): void {
    this.db
      .transaction(() => {
        this.s.updateGroup.run(change.name, change.description, id);
        for (const m of change.add) this.s.addMember.run(id, m, 0);
        for (const m of change.remove) this.s.removeMember.run(id, m);
        for (const m of change.admins) this.s.setAdmin.run(1, id, m);
        for (const m of change.removeAdmins) this.s.setAdmin.run(0, id, m);
      })
      .immediate();
  }

  setGroupBlocked(owner: string, groupId: string, blocked: boolean): void {
    (blocked ? this.s.blockGroup : this.s.unblockGroup).run(owner, groupId);
  }

  isGroupBlocked(owner: string, groupId: string): boolean {
    return this.s.isGroupBlocked.get(owner, groupId) !== undefined;
  }

  createLink(uuid: string, pubKey: string, requester: string): void {
    this.s.insertLink.run(uuid, pubKey, requester, Date.now());
  }

  link(uuid: string): LinkRow | undefined {
    return this.s.link.get(uuid) as LinkRow | undefined;
  }

  nameLink(uuid: string, deviceName: string): void {
    this.s.nameLink.run(deviceName, uuid);
  }

  /** True when this call accepted the link (it was pending). */
  acceptLink(uuid: string, primary: string): boolean {
    return this.s.acceptLink.run(primary, Date.now(), uuid).changes === 1;
  }

  devices(primary: string): { uuid: string; requester: string; deviceName: string | null; acceptedAt: number }[] {
    return this.s.devices.all(primary) as {
      uuid: string;
      requester: string;
      deviceName: string | null;
      acceptedAt: number;
    }[];
  }

  putAttachment(a: AttachmentRow): void {
    this.s.insertAttachment.run(a.id, a.contentType, a.filename, a.data, Date.now());
  }

  attachment(id: string): AttachmentRow | undefined {
    return this.s.attachment.get(id) as AttachmentRow | undefined;
  }

  /** Changes whenever another connection commits to the file. */
  dataVersion(): number {
    return this.s.dataVersion.get() as number;
  }

  /** One checkpoint on this connection (the fallback when no worker thread can do it). */
  private checkpoint(): void {
    try {
      const [r] = this.db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
      if (r && r.log * this.pageSize > WAL_LIMIT_BYTES) {
        this.db.pragma('busy_timeout = 10');
        try {
          this.db.pragma('wal_checkpoint(TRUNCATE)');
        } finally {
          this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
        }
      }
    } catch {
      // busy or closing: the next tick tries again
    }
  }

  /** Closes the connection and waits for the checkpointer's to be closed too. */
  async close(): Promise<void> {
    const checkpointer = this.checkpointer.stop();
    this.db.close();
    await checkpointer;
  }
}

import { randomUUID } from 'node:crypto';
import type { Envelope } from '@vigil/shared-types';
import type Database from 'better-sqlite3';
import { BUSY_TIMEOUT_MS, openDatabase, type Synchronous } from '../sqlite.js';
import { LockedWriter } from '../writes.js';
import { startCheckpointer, WAL_BOUND_BYTES } from './checkpoint.js';
import { GroupCommit } from './group-commit.js';
import {
  type AccountRow,
  type AttachmentRow,
  createSchema,
  type GroupMember,
  type GroupRow,
  type LinkRow,
} from './schema.js';

export type { AccountRow, AttachmentRow, GroupMember, GroupRow, LinkRow };

/** A device linked to an account: its id (1 is the primary), the link's uuid and the name it gave. */
export interface LinkedDevice {
  readonly id: number;
  readonly uuid: string;
  readonly requester: string;
  readonly deviceName: string | null;
  readonly acceptedAt: number;
}

/**
 * The local network: one SQLite file (WAL) shared by every daemon of the user. It holds the
 * registered accounts, the mailboxes of messages not yet picked up, groups, contacts and blocks,
 * link requests and attachments. Daemons in different processes use it at the same time: every
 * write is a short IMMEDIATE transaction and readers wait up to `busy_timeout` for a writer.
 */

export class NetworkStore {
  readonly db: Database.Database;
  /** The file's id (see createSchema). */
  readonly id: string;
  private readonly s;

  private readonly checkpointer: { stop(): Promise<void> };
  private readonly writer: LockedWriter;
  private readonly sends: GroupCommit;

  constructor(
    readonly file: string,
    synchronous: Synchronous = 'normal',
  ) {
    this.db = openDatabase(file, synchronous);
    // Checkpoints are this package's own (see checkpoint.ts), not SQLite's automatic ones.
    this.db.pragma('wal_autocheckpoint = 0');
    this.db.pragma(`journal_size_limit = ${WAL_BOUND_BYTES}`);
    this.checkpointer = startCheckpointer(file, this.db, BUSY_TIMEOUT_MS);
    this.id = createSchema(this.db);
    this.writer = new LockedWriter(this.db, BUSY_TIMEOUT_MS);
    this.sends = new GroupCommit(this.db, (fn) => this.writer.write(fn));
    const db = this.db;
    this.s = {
      account: db.prepare('SELECT number, uuid, profile_name AS profileName FROM accounts WHERE number = ?'),
      accounts: db.prepare('SELECT number, uuid, profile_name AS profileName FROM accounts ORDER BY number'),
      insertAccount: db.prepare(
        'INSERT INTO accounts (number, uuid, profile_name, registered_at) VALUES (?, ?, ?, ?) ' +
          'ON CONFLICT (number) DO UPDATE SET profile_name = excluded.profile_name',
      ),
      post: db.prepare('INSERT INTO mailbox (recipient, envelope, created_at) VALUES (?, ?, ?)'),
      mail: db.prepare('SELECT id, envelope FROM mailbox WHERE recipient = ? AND id > ? ORDER BY id LIMIT ?'),
      // The oldest `limit` rows of a recipient up to an id (by the index on (recipient, id)).
      deleteMailUpTo: db.prepare(
        'DELETE FROM mailbox WHERE id IN (SELECT id FROM mailbox WHERE recipient = ? AND id <= ? ORDER BY id LIMIT ?)',
      ),
      contact: db.prepare('INSERT OR IGNORE INTO contacts (owner, number) VALUES (?, ?)'),
      removeContact: db.prepare('DELETE FROM contacts WHERE owner = ? AND number = ?'),
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
        'SELECT rowid + 1 AS id, uuid, requester, device_name AS deviceName, accepted_at AS acceptedAt FROM links ' +
          'WHERE primary_number = ? ORDER BY accepted_at',
      ),
      insertAttachment: db.prepare(
        'INSERT INTO attachments (id, content_type, filename, data, created_at) VALUES (?, ?, ?, ?, ?)',
      ),
      attachment: db.prepare('SELECT id, content_type AS contentType, filename, data FROM attachments WHERE id = ?'),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      probe: db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
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
   * Posts envelopes to mailboxes and records the recipients as the sender's contacts, atomically;
   * the posts made in one turn of the event loop share one transaction (group-commit.ts: one write
   * lock for a burst, the file being shared with other daemons). Resolves once committed; while
   * another process holds the write lock it waits off the event loop (see write), and posts
   * commit in the order they were made.
   */
  post(
    sender: string,
    deliveries: readonly { recipient: string; envelope: Envelope }[],
    alsoInTransaction?: () => void,
  ): Promise<void> {
    if (deliveries.length === 0 && !alsoInTransaction) return Promise.resolve();
    // A send to several recipients posts one envelope to each: serialised once.
    let last: Envelope | undefined;
    let lastJson = '';
    const envelopes = deliveries.map((d) => {
      if (d.envelope !== last) {
        last = d.envelope;
        lastJson = JSON.stringify(d.envelope);
      }
      return lastJson;
    });
    return this.sends.add(() => {
      const now = Date.now();
      deliveries.forEach((d, i) => {
        this.s.post.run(d.recipient, envelopes[i], now);
        const recipient = d.recipient;
        if (recipient !== sender)
          this.once(`contact:${sender}:${recipient}`, () => this.s.contact.run(sender, recipient));
      });
      alsoInTransaction?.();
    });
  }

  /**
   * From inside a post's `alsoInTransaction`: `write` runs once per group commit under `key`
   * (see group-commit.ts), for a write the posts of a burst share.
   */
  once(key: string, write: () => void): void {
    this.sends.once(key, write);
  }

  /** Runs a write that needs the file's write lock (see ../writes.ts); writes commit in order. */
  write(fn: () => void): Promise<void> {
    return this.writer.write(fn);
  }

  /**
   * The oldest mail of a recipient after the id `after` (each envelope with its JSON as stored),
   * with the id of the last one taken.
   */
  mail(
    number: string,
    limit: number,
    after: number,
  ): { envelopes: { envelope: Envelope; json: string }[]; lastId: number } {
    const rows = this.s.mail.all(number, after, limit) as { id: number; envelope: string }[];
    return {
      envelopes: rows.map((r) => ({ envelope: JSON.parse(r.envelope) as Envelope, json: r.envelope })),
      lastId: rows.length > 0 ? rows[rows.length - 1]!.id : 0,
    };
  }

  /** Deletes a recipient's mail up to `lastId`, at most `limit` rows (the oldest); how many. */
  deleteMailUpTo(number: string, lastId: number, limit: number): number {
    return this.s.deleteMailUpTo.run(number, lastId, limit).changes;
  }

  addContact(owner: string, number: string): void {
    if (owner !== number) this.s.contact.run(owner, number);
  }

  removeContact(owner: string, number: string): void {
    this.s.removeContact.run(owner, number);
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

  /** The devices linked to `primary`; a device's id (its link's row id + 1, the primary being 1) never changes. */
  devices(primary: string): LinkedDevice[] {
    return this.s.devices.all(primary) as LinkedDevice[];
  }

  /** Forgets a linked device (removeDevice); true when there was one. */
  removeDevice(primary: string, id: number): boolean {
    return (
      this.db.prepare('DELETE FROM links WHERE rowid = ? AND primary_number = ?').run(id - 1, primary).changes === 1
    );
  }

  /** Renames a linked device (updateDevice); true when there is one. */
  renameDevice(primary: string, id: number, name: string): boolean {
    const sql = 'UPDATE links SET device_name = ? WHERE rowid = ? AND primary_number = ?';
    return this.db.prepare(sql).run(name, id - 1, primary).changes === 1;
  }

  private staged: AttachmentRow[] | null = null;

  /** Stores an attachment, or stages it while `stageAttachments` runs. */
  putAttachment(a: AttachmentRow): void {
    if (this.staged) this.staged.push(a);
    else this.s.insertAttachment.run(a.id, a.contentType, a.filename, a.data, Date.now());
  }

  /**
   * Runs `fn` with attachments staged instead of stored: they are written with `storeAttachments`
   * in the transaction of the message that carries them, so a failed send stores none of them.
   */
  stageAttachments<T>(fn: () => T): { result: T; staged: AttachmentRow[] } {
    const staged: AttachmentRow[] = [];
    this.staged = staged;
    try {
      return { result: fn(), staged };
    } finally {
      this.staged = null;
    }
  }

  storeAttachments(rows: readonly AttachmentRow[]): void {
    for (const a of rows) this.s.insertAttachment.run(a.id, a.contentType, a.filename, a.data, Date.now());
  }

  attachment(id: string): AttachmentRow | undefined {
    return this.s.attachment.get(id) as AttachmentRow | undefined;
  }

  /** Changes whenever another connection commits to the file. */
  dataVersion(): number {
    return this.s.dataVersion.get() as number;
  }

  /** A small write that proves the file can be written (after a storage fault). */
  probeWrite(account: string): void {
    this.s.probe.run(`probe:${account}`, String(Date.now()));
  }

  /** Closes the connection and waits for the checkpointer's to be closed too. */
  async close(): Promise<void> {
    const checkpointer = this.checkpointer.stop();
    this.db.close();
    await checkpointer;
  }
}

/**
 * The network file's tables beyond the core ones of store.ts: profiles, contacts' details,
 * identity keys and their trust, the index of sent messages (what a reaction, a remote delete or
 * an edit may point at), group settings and invite links, groups left, and who sent a received
 * attachment. Tables are only ever added (CREATE … IF NOT EXISTS), so an older file gains them.
 */
import type Database from 'better-sqlite3';

const TABLES = `
CREATE TABLE IF NOT EXISTS profiles (
  number TEXT PRIMARY KEY, given_name TEXT, family_name TEXT, about TEXT, about_emoji TEXT,
  avatar BLOB, updated_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS contact_details (
  owner TEXT NOT NULL, number TEXT NOT NULL, given_name TEXT, family_name TEXT, nick_given_name TEXT,
  nick_family_name TEXT, note TEXT, expiration INTEGER, request TEXT, PRIMARY KEY (owner, number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS identities (number TEXT PRIMARY KEY, identity_key TEXT NOT NULL, changed_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS trust (
  owner TEXT NOT NULL, number TEXT NOT NULL, identity_key TEXT NOT NULL, level TEXT NOT NULL,
  added_at INTEGER NOT NULL, PRIMARY KEY (owner, number)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sent_messages (
  author TEXT NOT NULL, timestamp INTEGER NOT NULL, party TEXT NOT NULL, group_id TEXT,
  PRIMARY KEY (author, timestamp, party)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_settings (
  group_id TEXT PRIMARY KEY, link_password TEXT, link_state TEXT NOT NULL DEFAULT 'DISABLED',
  add_member TEXT NOT NULL DEFAULT 'EVERY_MEMBER', edit_details TEXT NOT NULL DEFAULT 'EVERY_MEMBER',
  send_messages TEXT NOT NULL DEFAULT 'EVERY_MEMBER', expiration INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS groups_left (owner TEXT NOT NULL, group_id TEXT NOT NULL, PRIMARY KEY (owner, group_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS received_attachments (
  owner TEXT NOT NULL, id TEXT NOT NULL, sender TEXT, group_id TEXT, received_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (owner, id)) WITHOUT ROWID;
`;

/** Brings an older file up to date: columns added since (a row from before counts as received at 0). */
function migrate(db: Database.Database): void {
  const columns = db.prepare('PRAGMA table_info(received_attachments)').all() as { name: string }[];
  if (!columns.some((c) => c.name === 'received_at')) {
    try {
      db.exec('ALTER TABLE received_attachments ADD COLUMN received_at INTEGER NOT NULL DEFAULT 0');
    } catch (err) {
      // Another daemon starting on the same file added it first.
      if (!/duplicate column/.test(String(err))) throw err;
    }
  }
  // Retention (retention.ts) finds an owner's oldest rows without reading them all.
  db.exec('CREATE INDEX IF NOT EXISTS received_attachments_age ON received_attachments (owner, received_at)');
}

export interface Profile {
  readonly givenName: string | null;
  readonly familyName: string | null;
  readonly about: string | null;
  readonly aboutEmoji: string | null;
  readonly hasAvatar: boolean;
  readonly updatedAt: number;
}

export interface ContactDetails {
  readonly givenName: string | null;
  readonly familyName: string | null;
  readonly nickGivenName: string | null;
  readonly nickFamilyName: string | null;
  readonly note: string | null;
  readonly expiration: number | null;
  readonly request: string | null;
}

export interface TrustRow {
  readonly identityKey: string;
  readonly level: string;
  readonly addedAt: number;
}

export interface GroupSettings {
  readonly linkPassword: string | null;
  readonly linkState: 'ENABLED' | 'DISABLED';
  readonly addMember: string;
  readonly editDetails: string;
  readonly sendMessages: string;
  readonly expiration: number;
}

const DEFAULT_SETTINGS: GroupSettings = {
  linkPassword: null,
  linkState: 'DISABLED',
  addMember: 'EVERY_MEMBER',
  editDetails: 'EVERY_MEMBER',
  sendMessages: 'EVERY_MEMBER',
  expiration: 0,
};

export class Records {
  private readonly s;

  constructor(private readonly db: Database.Database) {
    db.exec(TABLES);
    migrate(db);
    this.s = {
      profile: db.prepare(
        'SELECT given_name AS givenName, family_name AS familyName, about, about_emoji AS aboutEmoji, ' +
          'avatar IS NOT NULL AS hasAvatar, updated_at AS updatedAt FROM profiles WHERE number = ?',
      ),
      setProfile: db.prepare(
        'INSERT INTO profiles (number, given_name, family_name, about, about_emoji, avatar, updated_at) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (number) DO UPDATE SET given_name = excluded.given_name, ' +
          'family_name = excluded.family_name, about = excluded.about, about_emoji = excluded.about_emoji, ' +
          'avatar = excluded.avatar, updated_at = excluded.updated_at',
      ),
      avatar: db.prepare('SELECT avatar FROM profiles WHERE number = ?').pluck(),
      contact: db.prepare(
        'SELECT given_name AS givenName, family_name AS familyName, nick_given_name AS nickGivenName, ' +
          'nick_family_name AS nickFamilyName, note, expiration, request FROM contact_details WHERE owner = ? AND number = ?',
      ),
      setContact: db.prepare(
        'INSERT INTO contact_details (owner, number, given_name, family_name, nick_given_name, nick_family_name, ' +
          'note, expiration, request) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner, number) DO UPDATE SET ' +
          'given_name = excluded.given_name, family_name = excluded.family_name, nick_given_name = ' +
          'excluded.nick_given_name, nick_family_name = excluded.nick_family_name, note = excluded.note, ' +
          'expiration = excluded.expiration, request = excluded.request',
      ),
      identity: db.prepare('SELECT identity_key FROM identities WHERE number = ?').pluck(),
      setIdentity: db.prepare(
        'INSERT INTO identities (number, identity_key, changed_at) VALUES (?, ?, ?) ' +
          'ON CONFLICT (number) DO UPDATE SET identity_key = excluded.identity_key, changed_at = excluded.changed_at ' +
          'WHERE identity_key <> excluded.identity_key',
      ),
      trust: db.prepare(
        'SELECT identity_key AS identityKey, level, added_at AS addedAt FROM trust WHERE owner = ? AND number = ?',
      ),
      trusted: db.prepare('SELECT number FROM trust WHERE owner = ? ORDER BY number').pluck(),
      setTrust: db.prepare(
        'INSERT INTO trust (owner, number, identity_key, level, added_at) VALUES (?, ?, ?, ?, ?) ' +
          'ON CONFLICT (owner, number) DO UPDATE SET identity_key = excluded.identity_key, level = excluded.level, ' +
          'added_at = excluded.added_at',
      ),
      // Delivery's noteSenders would write nothing for this sender: a contact, trusted if it has a key.
      senderNoted: db
        .prepare(
          'SELECT EXISTS (SELECT 1 FROM contacts WHERE owner = @owner AND number = @number) AND (EXISTS ' +
            '(SELECT 1 FROM trust WHERE owner = @owner AND number = @number) OR NOT EXISTS ' +
            '(SELECT 1 FROM identities WHERE number = @number))',
        )
        .pluck(),
      tofu: db.prepare(
        'INSERT OR IGNORE INTO trust (owner, number, identity_key, level, added_at) ' +
          "SELECT ?, number, identity_key, 'TRUSTED_UNVERIFIED', ? FROM identities WHERE number = ?",
      ),
      keys: db.prepare(
        'SELECT i.identity_key AS published, t.identity_key AS trusted FROM identities i ' +
          'LEFT JOIN trust t ON t.owner = ? AND t.number = i.number WHERE i.number = ?',
      ),
      recordSent: db.prepare(
        'INSERT OR IGNORE INTO sent_messages (author, timestamp, party, group_id) VALUES (?, ?, ?, ?)',
      ),
      sentTo: db.prepare('SELECT group_id FROM sent_messages WHERE author = ? AND timestamp = ? AND party = ?'),
      sentBy: db.prepare('SELECT party, group_id AS groupId FROM sent_messages WHERE author = ? AND timestamp = ?'),
      settings: db.prepare(
        'SELECT link_password AS linkPassword, link_state AS linkState, add_member AS addMember, ' +
          'edit_details AS editDetails, send_messages AS sendMessages, expiration FROM group_settings WHERE group_id = ?',
      ),
      setSettings: db.prepare(
        'INSERT INTO group_settings (group_id, link_password, link_state, add_member, edit_details, send_messages, ' +
          'expiration) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (group_id) DO UPDATE SET link_password = ' +
          'excluded.link_password, link_state = excluded.link_state, add_member = excluded.add_member, ' +
          'edit_details = excluded.edit_details, send_messages = excluded.send_messages, expiration = excluded.expiration',
      ),
      groupByLink: db
        .prepare("SELECT group_id FROM group_settings WHERE link_password = ? AND link_state = 'ENABLED'")
        .pluck(),
      leave: db.prepare('INSERT OR IGNORE INTO groups_left (owner, group_id) VALUES (?, ?)'),
      forget: db.prepare('DELETE FROM groups_left WHERE owner = ? AND group_id = ?'),
      groupsLeft: db.prepare('SELECT group_id FROM groups_left WHERE owner = ?').pluck(),
      receivedAttachment: db.prepare(
        'INSERT OR IGNORE INTO received_attachments (owner, id, sender, group_id, received_at) VALUES (?, ?, ?, ?, ?)',
      ),
      attachmentOrigin: db.prepare(
        'SELECT sender, group_id AS groupId FROM received_attachments WHERE owner = ? AND id = ?',
      ),
    };
  }

  profile(number: string): Profile | undefined {
    const r = this.s.profile.get(number) as (Omit<Profile, 'hasAvatar'> & { hasAvatar: number }) | undefined;
    return r && { ...r, hasAvatar: r.hasAvatar === 1 };
  }

  setProfile(number: string, p: Omit<Profile, 'hasAvatar' | 'updatedAt'>, avatar: Buffer | null): void {
    this.s.setProfile.run(number, p.givenName, p.familyName, p.about, p.aboutEmoji, avatar, Date.now());
  }

  avatar(number: string): Buffer | null {
    return (this.s.avatar.get(number) as Buffer | null | undefined) ?? null;
  }

  contact(owner: string, number: string): ContactDetails | undefined {
    return this.s.contact.get(owner, number) as ContactDetails | undefined;
  }

  setContact(owner: string, number: string, c: ContactDetails): void {
    this.s.setContact.run(
      owner,
      number,
      c.givenName,
      c.familyName,
      c.nickGivenName,
      c.nickFamilyName,
      c.note,
      c.expiration,
      c.request,
    );
  }

  identity(number: string): string | undefined {
    return this.s.identity.get(number) as string | undefined;
  }

  /** Publishes an account's identity key; true when it differs from the one published before. */
  publishIdentity(number: string, key: string): boolean {
    const before = this.identity(number);
    this.s.setIdentity.run(number, key, Date.now());
    return before !== undefined && before !== key;
  }

  trust(owner: string, number: string): TrustRow | undefined {
    return this.s.trust.get(owner, number) as TrustRow | undefined;
  }

  trustedNumbers(owner: string): string[] {
    return this.s.trusted.all(owner) as string[];
  }

  setTrust(owner: string, number: string, key: string, level: string): void {
    this.s.setTrust.run(owner, number, key, level, Date.now());
  }

  /** Trust on first use: `owner` trusts `number`'s published key (unverified) if it has none on record for it yet. */
  /** Whether `number` is a contact of `owner` and, when it has published a key, trusted by it. */
  senderNoted(owner: string, number: string): boolean {
    return this.s.senderNoted.get({ owner, number }) === 1;
  }

  trustOnFirstUse(owner: string, number: string): void {
    this.s.tofu.run(owner, Date.now(), number);
  }

  /** Whether `number` published a key other than the one `owner` trusts (false when either is missing). */
  keyChanged(owner: string, number: string): boolean {
    const row = this.s.keys.get(owner, number) as { published: string; trusted: string | null } | undefined;
    return row !== undefined && row.trusted !== null && row.trusted !== row.published;
  }

  recordSent(author: string, timestamp: number, parties: readonly string[], groupId: string | null): void {
    for (const party of new Set([author, ...parties])) this.s.recordSent.run(author, timestamp, party, groupId);
  }

  /** Whether `party` took part in the message (`author`, `timestamp`). */
  wasSentTo(author: string, timestamp: number, party: string): boolean {
    return this.s.sentTo.get(author, timestamp, party) !== undefined;
  }

  sentBy(author: string, timestamp: number): { party: string; groupId: string | null }[] {
    return this.s.sentBy.all(author, timestamp) as { party: string; groupId: string | null }[];
  }

  settings(groupId: string): GroupSettings {
    return (this.s.settings.get(groupId) as GroupSettings | undefined) ?? DEFAULT_SETTINGS;
  }

  setSettings(groupId: string, g: GroupSettings): void {
    this.s.setSettings.run(
      groupId,
      g.linkPassword,
      g.linkState,
      g.addMember,
      g.editDetails,
      g.sendMessages,
      g.expiration,
    );
  }

  groupByLink(password: string): string | undefined {
    return this.s.groupByLink.get(password) as string | undefined;
  }

  leaveGroup(owner: string, groupId: string): void {
    this.s.leave.run(owner, groupId);
  }

  forgetGroup(owner: string, groupId: string): void {
    this.s.forget.run(owner, groupId);
  }

  groupsLeft(owner: string): string[] {
    return this.s.groupsLeft.all(owner) as string[];
  }

  receivedAttachment(owner: string, id: string, sender: string | null, groupId: string | null, at: number): void {
    this.s.receivedAttachment.run(owner, id, sender, groupId, at);
  }

  attachmentOrigin(owner: string, id: string): { sender: string | null; groupId: string | null } | undefined {
    return this.s.attachmentOrigin.get(owner, id) as { sender: string | null; groupId: string | null } | undefined;
  }

  /** Runs `fn` in one IMMEDIATE transaction. */
  transaction(fn: () => void): void {
    this.db.transaction(fn).immediate();
  }
}

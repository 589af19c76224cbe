/**
 * The network file's tables of signal-cli 0.14's further methods: sticker packs (uploaded to the
 * network, installed per account), group avatars, and per-account settings that a real server
 * would hold (the registration lock PIN, the account and configuration flags, this device's
 * name). Tables are only ever added (CREATE … IF NOT EXISTS), so an older file gains them.
 */
import type Database from 'better-sqlite3';

const TABLES = `
CREATE TABLE IF NOT EXISTS sticker_packs (
  pack_id TEXT PRIMARY KEY, pack_key TEXT NOT NULL, title TEXT NOT NULL, author TEXT NOT NULL,
  cover_id INTEGER, uploaded_by TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stickers (
  pack_id TEXT NOT NULL REFERENCES sticker_packs (pack_id), id INTEGER NOT NULL, emoji TEXT NOT NULL,
  content_type TEXT NOT NULL, data BLOB NOT NULL, PRIMARY KEY (pack_id, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sticker_installs (
  owner TEXT NOT NULL, pack_id TEXT NOT NULL, installed_at INTEGER NOT NULL, PRIMARY KEY (owner, pack_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS group_avatars (group_id TEXT PRIMARY KEY, data BLOB NOT NULL, updated_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS account_settings (
  number TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (number, key)) WITHOUT ROWID;
`;

export interface StickerRow {
  readonly id: number;
  readonly emoji: string;
  readonly contentType: string;
}

export interface StickerPackRow {
  readonly packId: string;
  readonly packKey: string;
  readonly title: string;
  readonly author: string;
  readonly coverId: number | null;
}

/** A pack as it is uploaded: its stickers with their data (the cover is one of them, by id). */
export interface NewStickerPack extends StickerPackRow {
  readonly stickers: readonly (StickerRow & { readonly data: Buffer })[];
}

export class Extras {
  private readonly s;

  constructor(private readonly db: Database.Database) {
    db.exec(TABLES);
    this.s = {
      insertPack: db.prepare(
        'INSERT INTO sticker_packs (pack_id, pack_key, title, author, cover_id, uploaded_by, created_at) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      insertSticker: db.prepare('INSERT INTO stickers (pack_id, id, emoji, content_type, data) VALUES (?, ?, ?, ?, ?)'),
      install: db.prepare('INSERT OR IGNORE INTO sticker_installs (owner, pack_id, installed_at) VALUES (?, ?, ?)'),
      pack: db.prepare(
        'SELECT pack_id AS packId, pack_key AS packKey, title, author, cover_id AS coverId FROM sticker_packs ' +
          'WHERE pack_id = ?',
      ),
      installed: db.prepare(
        'SELECT p.pack_id AS packId, p.pack_key AS packKey, p.title, p.author, p.cover_id AS coverId ' +
          'FROM sticker_installs i JOIN sticker_packs p ON p.pack_id = i.pack_id WHERE i.owner = ? ORDER BY i.installed_at',
      ),
      stickers: db.prepare('SELECT id, emoji, content_type AS contentType FROM stickers WHERE pack_id = ? ORDER BY id'),
      stickerData: db.prepare('SELECT data FROM stickers WHERE pack_id = ? AND id = ?'),
      groupAvatar: db.prepare('SELECT data FROM group_avatars WHERE group_id = ?'),
      setGroupAvatar: db.prepare(
        'INSERT INTO group_avatars (group_id, data, updated_at) VALUES (?, ?, ?) ' +
          'ON CONFLICT (group_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at',
      ),
      setting: db.prepare('SELECT value FROM account_settings WHERE number = ? AND key = ?'),
      setSetting: db.prepare(
        'INSERT INTO account_settings (number, key, value) VALUES (?, ?, ?) ' +
          'ON CONFLICT (number, key) DO UPDATE SET value = excluded.value',
      ),
      clearSetting: db.prepare('DELETE FROM account_settings WHERE number = ? AND key = ?'),
    };
  }

  /** Stores a pack and its stickers, installed for its uploader (call inside a transaction). */
  addPack(uploader: string, pack: NewStickerPack): void {
    const now = Date.now();
    this.s.insertPack.run(pack.packId, pack.packKey, pack.title, pack.author, pack.coverId, uploader, now);
    for (const st of pack.stickers) {
      this.s.insertSticker.run(pack.packId, st.id, st.emoji, st.contentType, st.data);
    }
    this.s.install.run(uploader, pack.packId, now);
  }

  install(owner: string, packId: string): void {
    this.s.install.run(owner, packId, Date.now());
  }

  pack(packId: string): StickerPackRow | undefined {
    return this.s.pack.get(packId) as StickerPackRow | undefined;
  }

  installedPacks(owner: string): StickerPackRow[] {
    return this.s.installed.all(owner) as StickerPackRow[];
  }

  stickers(packId: string): StickerRow[] {
    return this.s.stickers.all(packId) as StickerRow[];
  }

  sticker(packId: string, id: number): Buffer | undefined {
    return (this.s.stickerData.get(packId, id) as { data: Buffer } | undefined)?.data;
  }

  groupAvatar(groupId: string): Buffer | undefined {
    return (this.s.groupAvatar.get(groupId) as { data: Buffer } | undefined)?.data;
  }

  setGroupAvatar(groupId: string, data: Buffer): void {
    this.s.setGroupAvatar.run(groupId, data, Date.now());
  }

  setting(number: string, key: string): string | undefined {
    return (this.s.setting.get(number, key) as { value: string } | undefined)?.value;
  }

  /** Sets (or, with null, clears) one of an account's settings. */
  setSetting(number: string, key: string, value: string | null): void {
    if (value === null) this.s.clearSetting.run(number, key);
    else this.s.setSetting.run(number, key, value);
  }

  /** Runs `fn` in one IMMEDIATE transaction. */
  transaction(fn: () => void): void {
    this.db.transaction(fn).immediate();
  }
}

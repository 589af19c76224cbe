/**
 * What the local network's file holds: its tables, and the rows the store reads from them.
 * Every table is created if missing, so daemons of this version open a file any of them made.
 */
import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';

const SCHEMA_VERSION = 1;

const TABLES = `
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
`;

/**
 * Creates what is missing and records the schema version (the first daemon's) and the file's id
 * (random, made once: a file made anew has another, so a daemon's position in its mailbox, kept in
 * its own inbox, is known to be of this file). Returns the id.
 */
export function createSchema(db: Database.Database): string {
  db.exec(TABLES);
  const meta = db.prepare('INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)');
  meta.run('schema', String(SCHEMA_VERSION));
  meta.run('network', randomBytes(8).toString('hex'));
  return db.prepare("SELECT value FROM meta WHERE key = 'network'").pluck().get() as string;
}

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

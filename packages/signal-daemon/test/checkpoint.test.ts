import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { checkpointOnce, HARD_LIMIT_FACTOR } from '../worker/checkpoint.js';
import { tmpDir } from './helpers.js';

/** A WAL file of its own (no automatic checkpoints), rows of about one page each. */
function walDb(dir: string) {
  const file = join(dir, 'net.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('wal_autocheckpoint = 0');
  db.exec('CREATE TABLE t (x TEXT)');
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  const pageSize = db.pragma('page_size', { simple: true }) as number;
  const write = (rows: number) => {
    for (let i = 0; i < rows; i++) insert.run('x'.repeat(pageSize - 100));
  };
  const walBytes = () => statSync(`${file}-wal`).size;
  return { db, pageSize, write, walBytes };
}

describe('the local network checkpointer', () => {
  it('truncates a WAL file over the limit only once no commit came since the last tick (a truncation stops every writer)', () => {
    const tmp = tmpDir();
    const { db, pageSize, write, walBytes } = walDb(tmp.dir);
    try {
      const limit = 16 * pageSize;
      const last = { log: -1 };
      write(40); // over the limit, under the hard limit
      checkpointOnce(db, pageSize, limit, 0, last);
      expect(walBytes()).toBeGreaterThan(limit); // commits came since the last tick: left alone
      write(10);
      checkpointOnce(db, pageSize, limit, 0, last);
      expect(walBytes()).toBeGreaterThan(limit);
      checkpointOnce(db, pageSize, limit, 0, last); // no commit since: truncated
      expect(walBytes()).toBe(0);
      expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(50);
    } finally {
      db.close();
      tmp.cleanup();
    }
  });

  it('restarts a WAL over the limit while commits come: the next commit writes it from its start, the file is not cut', () => {
    const tmp = tmpDir();
    const { db, pageSize, write, walBytes } = walDb(tmp.dir);
    try {
      const limit = 16 * pageSize;
      const last = { log: -1 };
      write(40); // over the limit, under the hard limit, commits since the last tick
      checkpointOnce(db, pageSize, limit, 0, last);
      const size = walBytes();
      expect(size).toBeGreaterThan(40 * pageSize); // not cut: a truncation would stop every writer
      write(2);
      const [r] = db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[];
      expect(r?.log).toBeLessThanOrEqual(8); // two commits from the start (without the restart: over 40)
      expect(walBytes()).toBe(size);
      expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(42);
    } finally {
      db.close();
      tmp.cleanup();
    }
  });

  it('truncates a WAL far over the limit even while commits come', () => {
    const tmp = tmpDir();
    const { db, pageSize, write, walBytes } = walDb(tmp.dir);
    try {
      const limit = 4 * pageSize;
      const last = { log: -1 };
      write(HARD_LIMIT_FACTOR * 4 + 8);
      checkpointOnce(db, pageSize, limit, 0, last);
      expect(walBytes()).toBe(0);
    } finally {
      db.close();
      tmp.cleanup();
    }
  });
});

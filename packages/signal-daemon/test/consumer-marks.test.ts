/**
 * Consumer marks while another process holds the file's write lock: the daemon does not sleep in
 * SQLite's busy wait on its event loop; the marks are written once the lock is free.
 */
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { ConsumerMarks } from '../src/consumers.js';
import { migrate } from '../src/inbox-schema.js';
import { openDatabase } from '../src/sqlite.js';
import { tmpDir } from './helpers.js';

describe('consumer marks', () => {
  it('are not waited for on the event loop while another connection holds the write lock, and are written once it is free', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'inbox.sqlite');
    const db = openDatabase(file); // its busy timeout is 5 s
    const other = new Database(file);
    try {
      migrate(db);
      const consumers = new ConsumerMarks(db, '+15550001', 0, () => {});
      const mark = () =>
        db.prepare("SELECT mark FROM inbox_consumer WHERE name = 'tool'").pluck().get() as number | undefined;
      other.exec('BEGIN IMMEDIATE');
      const h = consumers.open('tool', 10, false);
      h.wrote(7);
      const started = Date.now();
      h.close(); // the consumer leaves: its mark is written now, or tried again shortly
      expect(Date.now() - started).toBeLessThan(2500); // SQLite's busy wait would take the 5 s
      expect(mark()).toBeUndefined();
      other.exec('COMMIT');
      const deadline = Date.now() + 10_000;
      while (mark() === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(mark()).toBe(7);
      consumers.close();
    } finally {
      other.close();
      db.close();
      tmp.cleanup();
    }
  });
});

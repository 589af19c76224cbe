import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { TurnReads } from '../src/localnet/turn-reads.js';
import { tmpDir } from './helpers.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("a send's reads once per turn", () => {
  it('answers from memory within a turn; a write of its own connection or the next turn reads again', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'net.sqlite');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)');
    db.prepare('INSERT INTO t VALUES (?, ?)').run('a', 1);
    // Another daemon on the same network file: a connection of its own.
    const other = new Database(file);
    try {
      const reads = new TurnReads(db);
      const get = db.prepare('SELECT v FROM t WHERE k = ?').pluck();
      let looks = 0;
      const read = () => {
        looks += 1;
        return get.get('a') as number;
      };
      expect(reads.get('a', read)).toBe(1);
      expect(reads.get('a', read)).toBe(1);
      expect(looks).toBe(1);

      // Our own write is seen at once, in the same turn.
      db.prepare('UPDATE t SET v = ? WHERE k = ?').run(2, 'a');
      expect(reads.get('a', read)).toBe(2);
      expect(looks).toBe(2);

      // Another process's commit: at most one turn late.
      other.prepare('UPDATE t SET v = ? WHERE k = ?').run(3, 'a');
      expect(reads.get('a', read)).toBe(2);
      await nextTurn();
      expect(reads.get('a', read)).toBe(3);
      expect(looks).toBe(3);

      // Keys are apart; a write that changed no row keeps the memo.
      expect(reads.get('b', () => 'b')).toBe('b');
      db.prepare('UPDATE t SET v = 9 WHERE k = ?').run('none');
      expect(reads.get('a', read)).toBe(3);
      expect(looks).toBe(3);
    } finally {
      other.close();
      db.close();
      tmp.cleanup();
    }
  });
});

import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { GroupCommit } from '../src/localnet/group-commit.js';
import { NetworkStore } from '../src/localnet/store.js';
import { tmpDir } from './helpers.js';

const envelope = (n: number) => ({ source: '+15550000001', timestamp: n }) as never;

describe('group commit of sends', () => {
  it('sends made together share one transaction; each resolves once its row is visible to another connection', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'localnet.sqlite');
    const store = new NetworkStore(file);
    const other = new Database(file, { readonly: true });
    try {
      let writes = 0;
      const counted = new GroupCommit(store.db, (fn) => {
        writes += 1;
        return store.write(fn);
      });
      const post = store.db.prepare('INSERT INTO mailbox (recipient, envelope, created_at) VALUES (?, ?, ?)');
      const count = other.prepare('SELECT COUNT(*) FROM mailbox').pluck();
      const seenAtResolve: number[] = [];
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          counted
            .add(() => post.run('+15550000002', JSON.stringify(envelope(i)), Date.now()))
            .then(() => {
              seenAtResolve.push(count.get() as number);
            }),
        ),
      );
      expect(writes).toBe(1);
      // Committed before any answer: another process sees every row at the first resolve.
      expect(seenAtResolve.every((n) => n === 100)).toBe(true);
      // Through the store's own post as well: 50 posts, one transaction's worth of rows.
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          store.post('+15550000001', [{ recipient: '+15550000002', envelope: envelope(i) }]),
        ),
      );
      expect(count.get()).toBe(150);
    } finally {
      other.close();
      await store.close();
      tmp.cleanup();
    }
  });

  it('a send whose write fails is rolled back alone: the others of its group commit', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'localnet.sqlite');
    const store = new NetworkStore(file);
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 5 }, (_, i) =>
          store.post('+15550000001', [{ recipient: '+15550000002', envelope: envelope(i) }], () => {
            if (i === 2) throw new Error('refused');
          }),
        ),
      );
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      const rows = store.db.prepare('SELECT envelope FROM mailbox ORDER BY id').pluck().all() as string[];
      expect(rows.map((r) => JSON.parse(r).timestamp)).toEqual([0, 1, 3, 4]);
    } finally {
      await store.close();
      tmp.cleanup();
    }
  });
});

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

  it('a write the sends of a group share runs once per group, after them, and only for sends that succeeded', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'localnet.sqlite');
    const store = new NetworkStore(file);
    try {
      const ran: string[] = [];
      const group = new GroupCommit(store.db, (fn) => store.write(fn));
      const send = (i: number, fail = false) =>
        group.add(() => {
          ran.push(`send${i}`);
          group.once('shared', () => ran.push(`shared after send${i}`));
          group.once(`own${i}`, () => ran.push(`own${i}`));
          if (fail) throw new Error('refused');
        });
      await Promise.all([send(1), send(2), send(3)]);
      expect(ran).toEqual(['send1', 'send2', 'send3', 'shared after send1', 'own1', 'own2', 'own3']);
      // A failed send: the group runs again send by send; the failed one's shared writes are dropped.
      ran.length = 0;
      const results = await Promise.allSettled([send(4, true), send(5), send(6, true)]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled', 'rejected']);
      expect(ran.slice(-3)).toEqual(['send6', 'shared after send5', 'own5']);
      // Through the store: 20 posts to one recipient make it a contact once.
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.post('+15550000001', [{ recipient: '+15550000002', envelope: envelope(i) }]),
        ),
      );
      expect(store.contacts('+15550000001')).toEqual([{ number: '+15550000002', blocked: false }]);
    } finally {
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

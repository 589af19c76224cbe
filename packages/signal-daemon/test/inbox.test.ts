import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { INBOX_PRUNE_BATCH, Inbox } from '../src/inbox.js';

const envelope = (n: number) => ({ source: '+15550000001', timestamp: n }) as never;
const retention = { hours: 24, messages: 1_000_000, bytes: 1024 * 1024 * 1024 };

describe('the inbox', () => {
  it('gives every event after any position, in order, from memory or from the file, past the in-memory bound', () => {
    const db = new Database(':memory:');
    try {
      const inbox = new Inbox(db, '+15550000002', retention);
      // 7,000 events in batches of 1 to 37: past the in-memory bound (4,096 + slack) more than once.
      let n = 0;
      for (let size = 1; n < 7000; size = (size % 37) + 1) {
        const batch = Array.from({ length: Math.min(size, 7000 - n) }, (_, i) => envelope(n + i + 1));
        inbox.append(batch);
        n += batch.length;
      }
      expect(inbox.head).toBe(7000);
      for (const from of [0, 1, 2000, 2903, 2904, 2905, 4000, 6000, 6999]) {
        const got = inbox.after(from, 300);
        const want = Math.min(300, 7000 - from);
        expect(got.map((e) => e.seq)).toEqual(Array.from({ length: want }, (_, i) => from + i + 1));
        expect(got.map((e) => JSON.parse(e.json).envelope.timestamp)).toEqual(
          Array.from({ length: want }, (_, i) => from + i + 1),
        );
        expect(got.every((e) => e.bytes === Buffer.byteLength(e.json))).toBe(true);
      }
      expect(inbox.after(7000)).toEqual([]);
    } finally {
      db.close();
    }
  });

  describe('retention', () => {
    const ACCOUNT = '+15550000002';
    /** The rows the file holds for the account: seq and bytes, oldest first. */
    const rows = (db: Database.Database) =>
      db.prepare('SELECT seq, bytes FROM inbox WHERE account = ? ORDER BY seq').all(ACCOUNT) as {
        seq: number;
        bytes: number;
      }[];
    /** An inbox whose writes are recorded: the rows each one deleted, and whether the event loop ran before it. */
    function recorded(db: Database.Database, r: { hours: number; messages: number; bytes: number }) {
      const writes: { deleted: number; loopRan: boolean }[] = [];
      let loopRan = false;
      const write = async (fn: () => void) => {
        const before = rows(db).length;
        fn();
        writes.push({ deleted: before - rows(db).length, loopRan });
        loopRan = false;
        setImmediate(() => {
          loopRan = true;
        });
      };
      return { inbox: new Inbox(db, ACCOUNT, r, undefined, write), writes };
    }
    const fill = (inbox: Inbox, n: number) => {
      for (let i = 0; i < n; i += 500)
        inbox.append(Array.from({ length: Math.min(500, n - i) }, (_, k) => envelope(i + k + 1)));
    };

    it('cuts a backlog past the count in steps of at most a batch, each its own write, the event loop running between them', async () => {
      const db = new Database(':memory:');
      try {
        // A retention far above the count, then lowered: the backlog of a lowered retention.
        const big = new Inbox(db, ACCOUNT, retention);
        fill(big, 3 * INBOX_PRUNE_BATCH + 500);
        const { inbox, writes } = recorded(db, { ...retention, messages: 200 });
        const dropped = await inbox.prune();
        expect(dropped).toBe(3 * INBOX_PRUNE_BATCH + 300);
        expect(writes.map((w) => w.deleted)).toEqual([INBOX_PRUNE_BATCH, INBOX_PRUNE_BATCH, INBOX_PRUNE_BATCH, 300]);
        expect(writes.slice(1).every((w) => w.loopRan)).toBe(true);
        const left = rows(db);
        expect(left.map((r) => r.seq)).toEqual(
          Array.from({ length: 200 }, (_, i) => 3 * INBOX_PRUNE_BATCH + 300 + i + 1),
        );
        expect(inbox.size).toBe(200);
        // The stored bytes are kept without a scan: they agree with the file.
        expect(inbox.bytes).toBe(left.reduce((n, r) => n + r.bytes, 0));
        // Replay from the start gives what is retained, from the file or from memory.
        expect(inbox.after(0, 1000).map((e) => e.seq)).toEqual(left.map((r) => r.seq));
      } finally {
        db.close();
      }
    });

    it('starts a pass by itself once the head is a batch past the count bound', async () => {
      const db = new Database(':memory:');
      try {
        const { inbox, writes } = recorded(db, { ...retention, messages: 100 });
        fill(inbox, INBOX_PRUNE_BATCH + 100);
        expect(writes).toEqual([]);
        inbox.append([envelope(0)]);
        await new Promise((resolve) => setImmediate(resolve));
        expect(writes.length).toBe(1); // the pass is under way: its first step is done
        await inbox.prune(); // the same pass
        expect(writes.map((w) => w.deleted)).toEqual([INBOX_PRUNE_BATCH, 1]);
        expect(inbox.size).toBe(100);
      } finally {
        db.close();
      }
    });

    it('a pass that fails is tried again by arrivals once per batch past the bound, not at every arrival', async () => {
      const db = new Database(':memory:');
      try {
        let tries = 0;
        const inbox = new Inbox(db, ACCOUNT, { ...retention, messages: 100 }, undefined, async () => {
          tries++;
          throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
        });
        // 5,000 arrivals, 50 at a time, each batch in a turn of its own: 100 chances to start a pass.
        for (let i = 0; i < 5_000; i += 50) {
          inbox.append(Array.from({ length: 50 }, (_, k) => envelope(i + k + 1)));
          await new Promise((resolve) => setImmediate(resolve));
        }
        await expect(inbox.prune()).rejects.toThrow('database is locked');
        // The head passed the bound by a batch at 1,101, then every 1,000 more: 4 passes, and the last call's.
        expect(tries).toBe(5);
        expect(inbox.size).toBe(5_000);
      } finally {
        db.close();
      }
    });

    it('drops events older than the period, and keeps the bytes bound at every append', async () => {
      const db = new Database(':memory:');
      try {
        const { inbox } = recorded(db, { hours: 1, messages: 1_000_000, bytes: 1_000 });
        fill(inbox, 40);
        const perEvent = rows(db)[0]!.bytes;
        expect(inbox.bytes).toBeLessThanOrEqual(1_000);
        expect(inbox.size).toBe(Math.floor(1_000 / perEvent));
        expect(inbox.bytes).toBe(rows(db).reduce((n, r) => n + r.bytes, 0));
        expect(rows(db).at(-1)!.seq).toBe(40);
        // An hour later every event is past the period.
        expect(await inbox.prune(Date.now() + 3_600_001)).toBe(Math.floor(1_000 / perEvent));
        expect(inbox.size).toBe(0);
        expect(inbox.bytes).toBe(0);
        expect(inbox.after(0)).toEqual([]);
      } finally {
        db.close();
      }
    });
  });
});

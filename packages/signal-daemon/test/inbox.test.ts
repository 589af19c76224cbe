import { describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { Inbox } from '../src/inbox.js';

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
});

/**
 * Large messages and many streams: SSE is streamed, never built into one string; retention and
 * held messages are bounded in bytes; /api/v1/check answers while hundreds of replays run.
 * Real daemon processes, real HTTP clients.
 */
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import type { HostPort } from '@vigil/shared-types';
import Database from 'better-sqlite3';
import { exited, http, rpc, SseClient, spawnDaemon, startDaemon, tmpDir } from './helpers.js';

const A = '+15550000021';
const B = '+15550000022';

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A stream read as it comes, keeping only the size of each event (a comment is no event):
 * `done` resolves once `want` events came.
 */
function countingStream(addr: HostPort, lastEventId: string, want: number) {
  const sizes: number[] = [];
  let size = 0;
  let lastWasNewline = false;
  let resolveDone: () => void = () => {};
  const done = new Promise<void>((r) => {
    resolveDone = r;
  });
  const req = request(
    {
      host: addr.host,
      port: addr.port,
      path: '/api/v1/events',
      headers: { 'last-event-id': lastEventId },
      agent: false,
    },
    (res) => {
      res.on('data', (chunk: Buffer) => {
        for (let i = 0; i < chunk.length; i++) {
          const nl = chunk[i] === 0x0a;
          size++;
          if (nl && lastWasNewline) {
            if (size > 4) sizes.push(size);
            size = 0;
            if (sizes.length >= want) resolveDone();
          }
          lastWasNewline = nl;
        }
      });
      res.on('error', () => {});
    },
  );
  req.on('error', () => {});
  req.end();
  return { sizes, done, close: () => req.destroy() };
}

describe('large messages and many streams', () => {
  const tmp = tmpDir();
  afterAll(() => tmp.cleanup());

  it('replays 80 held messages of 7 MiB (more than one string can hold together) and stays up', async () => {
    const dir = join(tmp.dir, 'big');
    const localnet = join(dir, 'localnet.sqlite');
    const args = ['-a', A, '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--localnet', localnet];
    const b = await startDaemon(dir, B);
    let a = await spawnDaemon([...args, '--data-dir', join(dir, 'a')]);
    const BIG = 7 * 1024 * 1024;
    const COUNT = 80;
    try {
      await rpc(b.http!, 'send', { recipient: A, message: 'seed' });
      const stored = () => {
        const db = new Database(join(dir, 'a', 'inbox.sqlite'), { readonly: true, fileMustExist: true });
        try {
          return db.prepare('SELECT COUNT(*) FROM inbox WHERE account = ?').pluck().get(A) as number;
        } finally {
          db.close();
        }
      };
      await until('the seed is stored', () => stored() === 1);
      a.child.kill('SIGTERM');
      await exited(a.child);
      // What could have been stored before any size limit: written directly.
      const db = new Database(join(dir, 'a', 'inbox.sqlite'));
      const seed = db.prepare('SELECT json FROM inbox WHERE account = ? AND seq = 1').pluck().get(A) as string;
      const hasBytes = (db.prepare('PRAGMA table_info(inbox)').all() as { name: string }[]).some(
        (c) => c.name === 'bytes',
      );
      const insert = db.prepare(
        hasBytes
          ? 'INSERT INTO inbox (account, seq, json, received_at, bytes) VALUES (?, ?, ?, ?, ?)'
          : 'INSERT INTO inbox (account, seq, json, received_at) VALUES (?, ?, ?, ?)',
      );
      db.transaction(() => {
        for (let i = 0; i < COUNT; i++) {
          const json = seed.replace('"seed"', `"${String(i).padStart(2, '0')}${'x'.repeat(BIG)}"`);
          const row = [A, i + 2, json, Date.now()];
          insert.run(...(hasBytes ? [...row, Buffer.byteLength(json)] : row));
        }
        db.prepare('UPDATE inbox_head SET seq = ? WHERE account = ?').run(COUNT + 1, A);
      })();
      db.close();

      a = await spawnDaemon([...args, '--data-dir', join(dir, 'a')]);
      const replay = countingStream(a.http!, '0', COUNT + 1);
      // The daemon answers its check while it streams hundreds of MB.
      let checksDuring = 0;
      let finished = false;
      void replay.done.then(() => {
        finished = true;
      });
      while (!finished) {
        expect((await http(a.http!, { method: 'GET', path: '/api/v1/check', headers: {} })).status).toBe(200);
        if (!finished) checksDuring++;
        await Promise.race([replay.done, new Promise((r) => setTimeout(r, 200))]);
        expect(a.child.exitCode).toBeNull();
      }
      expect(checksDuring).toBeGreaterThan(0);
      expect(replay.sizes.length).toBe(COUNT + 1);
      // Each big event came whole: its text and the SSE framing.
      expect(replay.sizes.slice(1).every((s) => s > BIG && s < BIG + 2048)).toBe(true);
      replay.close();
      expect(a.child.exitCode).toBeNull();
    } finally {
      a.child.kill('SIGTERM');
      await exited(a.child);
      await b.close();
    }
  }, 240_000);

  it('bounds retention and held messages in bytes: the oldest go first', async () => {
    const dir = join(tmp.dir, 'bytes');
    const b = await startDaemon(dir, B);
    // 50 KiB messages (under the 64 KiB limit of a message): 20 of them are about 1 MiB.
    const KB50 = 50 * 1024;
    const a = await startDaemon(dir, A, { hold: true, retentionBytes: 512 * 1024, holdBytes: 175 * 1024 });
    try {
      for (let i = 1; i <= 20; i++) {
        await rpc(b.http!, 'send', { recipient: A, message: `${String(i).padStart(2, '0')}${'y'.repeat(KB50)}` });
      }
      await until('all 20 arrived', () => a.inbox.head === 20);
      expect(a.inbox.bytes).toBeLessThanOrEqual(512 * 1024);
      expect(a.inbox.size).toBeGreaterThanOrEqual(8);
      expect(a.inbox.size).toBeLessThanOrEqual(10);
      // The file agrees: what is stored is the newest, within the bound.
      const db = new Database(join(dir, A, 'inbox.sqlite'), { readonly: true });
      const rows = db.prepare('SELECT seq, length(json) AS n FROM inbox WHERE account = ? ORDER BY seq').all(A) as {
        seq: number;
        n: number;
      }[];
      db.close();
      expect(rows.reduce((n, r) => n + r.n, 0)).toBeLessThanOrEqual(512 * 1024);
      expect(rows[rows.length - 1]!.seq).toBe(20);
      // Held: at most 175 KiB of the newest (three of them).
      expect(a.inbox.held('sse')).toBe(3);
      const sse = await SseClient.open(a.http!);
      await sse.waitFor(3);
      await new Promise((r) => setTimeout(r, 300));
      expect(sse.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message.slice(0, 2))).toEqual([
        '18',
        '19',
        '20',
      ]);
      sse.close();
      // Replay from the start gives what is retained, no more.
      const replay = await SseClient.open(a.http!, '0');
      await replay.waitFor(rows.length);
      expect(replay.events.map((e) => Number(e.id!.split('.')[1]))).toEqual(rows.map((r) => r.seq));
      replay.close();
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  it('answers /api/v1/check while 200 streams replay', async () => {
    const dir = join(tmp.dir, 'many');
    const b = await startDaemon(dir, B);
    // Fill A's inbox in this process, then serve it from a real process.
    const filler = await startDaemon(dir, A, { hold: true });
    const text = 'z'.repeat(1000);
    const envelope = (i: number) => ({
      source: B,
      sourceNumber: B,
      sourceUuid: null,
      sourceName: B,
      sourceDevice: 1,
      timestamp: 1_700_000_000_000 + i,
      dataMessage: { timestamp: 1_700_000_000_000 + i, message: `${i}:${text}` } as never,
    });
    filler.inbox.append(Array.from({ length: 1000 }, (_, i) => envelope(i + 1)));
    await filler.close();
    const args = ['-a', A, '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--localnet', join(dir, 'localnet.sqlite')];
    const a = await spawnDaemon([...args, '--data-dir', join(dir, A)]);
    const streams = Array.from({ length: 200 }, () => countingStream(a.http!, '0', 1000));
    let finished = 0;
    for (const s of streams)
      void s.done.then(() => {
        finished++;
      });
    try {
      // Answered while replays are under way (each check waits behind at most a turn of each stream).
      const during: number[] = [];
      while (finished < streams.length) {
        const r = await http(a.http!, { method: 'GET', path: '/api/v1/check', headers: {} });
        expect(r.status).toBe(200);
        if (finished < streams.length) during.push(finished);
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(during.length).toBeGreaterThan(0);
      expect(streams.every((s) => s.sizes.length === 1000)).toBe(true);
      expect(a.child.exitCode).toBeNull();
    } finally {
      for (const s of streams) s.close();
      a.child.kill('SIGTERM');
      await exited(a.child);
      await b.close();
    }
  }, 240_000);
});

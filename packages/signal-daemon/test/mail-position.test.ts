/**
 * The local backend's inbox is a file of its own: what arrives is stored without the network
 * file's write lock, the position read in the mailbox is kept in the inbox's transactions, and the
 * mailbox rows go only once the inbox's WAL is on disk (mail-position.ts). An inbox an earlier
 * version kept in the network file is moved out of it (inbox-move.ts).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, jest } from '@jest/globals';
import Database from 'better-sqlite3';
import { until } from '../../../test/support.js';
import { migrate } from '../src/inbox-schema.js';
import { memoryLogger } from '../src/index.js';
import { MailPosition } from '../src/localnet/mail-position.js';
import { NetworkStore } from '../src/localnet/store.js';
import { openDatabase } from '../src/sqlite.js';
import { exited, rpc, SseClient, spawnDaemon, startDaemon, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';

const texts = (events: { data: string }[]) =>
  events.map((e) => JSON.parse(e.data).envelope.dataMessage.message as string);

const mailOf = (file: string, account: string) => () => {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT COUNT(*) FROM mailbox WHERE recipient = ?').pluck().get(account) as number;
  } finally {
    db.close();
  }
};

/**
 * A network file with `count` mails to A, an inbox file, and a MailPosition on them (no daemon):
 * `take` commits the position as delivery does, `flush` lets a removal's steps run.
 */
function files(count: number) {
  const tmp = tmpDir();
  const store = new NetworkStore(join(tmp.dir, 'localnet.sqlite'));
  const inbox = openDatabase(join(tmp.dir, 'inbox.sqlite'));
  const logs: Record<string, unknown>[] = [];
  store.register(A, 'A');
  const post = store.db.prepare("INSERT INTO mailbox (recipient, envelope, created_at) VALUES (?, '{}', 0)");
  const ids = Array.from({ length: count }, () => Number(post.run(A).lastInsertRowid));
  const position = new MailPosition(inbox, store, A, memoryLogger(logs));
  return {
    store,
    inbox,
    logs,
    ids,
    position,
    mail: () => store.db.prepare('SELECT id FROM mailbox WHERE recipient = ?').pluck().all(A) as number[],
    take: (id: number) => {
      inbox.transaction(() => position.record(id))();
      position.recorded(id);
      return Date.now();
    },
    flush: async () => {
      for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
    },
    close: async () => {
      inbox.close();
      await store.close();
      tmp.cleanup();
    },
  };
}

describe('the inbox in a file of its own', () => {
  it('stores and streams what arrives while another process holds the network file, keeps the mail until then, and after a kill -9 delivers nothing twice', async () => {
    const tmp = tmpDir();
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const args = ['--account', A, '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--localnet', localnet];
    const b = await startDaemon(tmp.dir, B);
    let a = await spawnDaemon([...args, '--data-dir', join(tmp.dir, 'a')]);
    const mail = mailOf(localnet, A);
    const lock = new Database(localnet);
    try {
      // The first message makes B a contact of A (a write to the network file); later ones need none.
      const stream = await SseClient.open(a.http!);
      await rpc(b.http!, 'send', { recipient: A, message: 'm0' });
      await stream.waitFor(1);
      await until('the delivered mail is removed', () => mail() === 0, 10_000);
      // A is stopped while B sends: the mail waits in the mailbox.
      a.child.kill('SIGSTOP');
      for (let i = 1; i <= 5; i++) await rpc(b.http!, 'send', { recipient: A, message: `m${i}` });
      await until('the mail is posted', () => mail() >= 5);
      // Another process takes the network file's write lock and keeps it; A goes on.
      lock.exec('BEGIN IMMEDIATE');
      a.child.kill('SIGCONT');
      await stream.waitFor(6, 15_000);
      expect(texts(stream.events)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
      // The rows cannot be removed while the lock is held (more than a checkpoint's second later).
      await new Promise((r) => setTimeout(r, 1500));
      expect(mail()).toBe(5);
      // Killed before it could remove them: they stay, and the position says they are delivered.
      a.child.kill('SIGKILL');
      await exited(a.child);
      lock.exec('ROLLBACK');
      stream.close();
      expect(mail()).toBe(5);

      a = await spawnDaemon([...args, '--data-dir', join(tmp.dir, 'a')]);
      const replay = await SseClient.open(a.http!, '0');
      await replay.waitFor(6);
      await rpc(b.http!, 'send', { recipient: A, message: 'm6' });
      await replay.waitFor(7);
      await new Promise((r) => setTimeout(r, 300)); // nothing more may come
      expect(texts(replay.events)).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6']);
      replay.close();
      // Once the inbox is on disk (a second at most), the delivered mail goes.
      await until('the delivered mail is removed', () => mail() === 0, 10_000);
    } finally {
      lock.close();
      a.child.kill('SIGKILL');
      await exited(a.child);
      await b.close();
      tmp.cleanup();
    }
  }, 90_000);

  it('reads a network file made anew from its start (its ids begin again)', async () => {
    const tmp = tmpDir();
    const localnet = join(tmp.dir, 'localnet.sqlite');
    let a = await startDaemon(tmp.dir, A);
    let b = await startDaemon(tmp.dir, B);
    try {
      for (let i = 1; i <= 3; i++) await rpc(b.http!, 'send', { recipient: A, message: `old${i}` });
      await until('three stored', () => a.inbox.head === 3);
      await a.close();
      await b.close();
      for (const f of ['', '-wal', '-shm']) rmSync(`${localnet}${f}`, { force: true });
      a = await startDaemon(tmp.dir, A);
      b = await startDaemon(tmp.dir, B);
      // Mail id 1 of the new file: below the old position, but of another file.
      await rpc(b.http!, 'send', { recipient: A, message: 'new1' });
      await until('the new message is stored', () => a.inbox.head === 4);
      expect(JSON.parse(a.inbox.after(3)[0]!.json).envelope.dataMessage.message).toBe('new1');
    } finally {
      await a.close();
      await b.close();
      tmp.cleanup();
    }
  });

  it('removes mail only up to what a checkpoint of the inbox found on disk', async () => {
    const { store, inbox, logs, ids, position, mail, take, flush, close } = files(4);
    try {
      const first = take(ids[1]!);
      // A checkpoint that began before the commit returned covers nothing of it.
      position.synced(first - 1);
      await flush();
      expect(mail()).toEqual(ids);
      await new Promise((r) => setTimeout(r, 5));
      position.synced(Date.now());
      await flush();
      expect(mail()).toEqual(ids.slice(2));
      // A later commit, then a checkpoint from before it: the rows stay.
      await new Promise((r) => setTimeout(r, 5));
      const second = take(ids[3]!);
      position.synced(second - 1);
      await flush();
      expect(mail()).toEqual(ids.slice(2));
      expect(position.at).toBe(ids[3]);
      // The position is in the inbox's file, with the network file's id.
      const again = new MailPosition(inbox, store, A, memoryLogger(logs));
      expect(again.at).toBe(ids[3]);
      await new Promise((r) => setTimeout(r, 5));
      position.synced(Date.now());
      await flush();
      expect(mail()).toEqual([]);
      expect(logs).toEqual([]);
    } finally {
      await close();
    }
  });

  it('remembers at most 100 commits while no checkpoint reports: a late report removes only what it can prove', async () => {
    // Only the clock is faked: the removal's writes and turns run for real.
    jest.useFakeTimers({
      doNotFake: [
        'nextTick',
        'setImmediate',
        'clearImmediate',
        'setTimeout',
        'clearTimeout',
        'setInterval',
        'clearInterval',
        'queueMicrotask',
        'performance',
        'hrtime',
      ],
    });
    const t0 = Date.now();
    const { ids, position, mail, take, flush, close } = files(150);
    try {
      // 150 commits, one mail each, 200 ms apart (each its own note), and no report meanwhile.
      ids.forEach((id, i) => {
        jest.setSystemTime(t0 + 1000 + i * 200);
        take(id);
      });
      // A report from just after the 40th commit: the notes of the first 50 were dropped, so it
      // proves nothing; one from after the 60th covers up to it.
      position.synced(t0 + 1000 + 39 * 200 + 1);
      await flush();
      expect(mail().length).toBe(150);
      position.synced(t0 + 1000 + 59 * 200 + 1);
      await flush();
      expect(mail().length).toBe(150 - 60);
      position.synced(t0 + 1000 + 150 * 200);
      await flush();
      expect(mail()).toEqual([]);
    } finally {
      jest.useRealTimers();
      await close();
    }
  });

  it('moves an inbox kept in the network file by an earlier version: same ids, same consumer marks, once', async () => {
    const tmp = tmpDir();
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const b = await startDaemon(tmp.dir, B);
    try {
      // The earlier layout: A's inbox tables in the network file (three messages; `tool` read two).
      const net = new Database(localnet);
      migrate(net);
      const now = Date.now();
      const event = (i: number) => JSON.stringify({ envelope: { dataMessage: { message: `kept${i}` } }, account: A });
      net.transaction(() => {
        net.prepare("INSERT INTO inbox_head (account, epoch, seq, delivered) VALUES (?, 'e0e0e0', 3, 2)").run(A);
        for (let i = 1; i <= 3; i++) {
          net
            .prepare('INSERT INTO inbox (account, seq, json, received_at, bytes) VALUES (?, ?, ?, ?, ?)')
            .run(A, i, event(i), now, Buffer.byteLength(event(i)));
        }
        net.prepare("INSERT INTO inbox_consumer (account, name, mark, seen_at) VALUES (?, 'tool', 2, ?)").run(A, now);
      })();
      net.close();

      let a = await startDaemon(tmp.dir, A, { consumers: ['tool'], hold: true });
      expect(a.inbox.epoch).toBe('e0e0e0');
      expect(a.inbox.head).toBe(3);
      expect(a.inbox.after(0).map((e) => JSON.parse(e.json).envelope.dataMessage.message)).toEqual([
        'kept1',
        'kept2',
        'kept3',
      ]);
      expect(a.inbox.consumerStates().find((c) => c.name === 'tool')?.held).toBe(1);
      expect(a.logs.some((l) => l.msg === 'moved the inbox out of the local network file' && l.messages === 3)).toBe(
        true,
      );
      const left = new Database(localnet, { readonly: true });
      for (const table of ['inbox', 'inbox_head', 'inbox_consumer']) {
        expect(left.prepare(`SELECT COUNT(*) FROM ${table} WHERE account = ?`).pluck().get(A)).toBe(0);
      }
      left.close();
      // New mail follows the moved messages; a restart copies nothing again.
      await rpc(b.http!, 'send', { recipient: A, message: 'new' });
      await until('the new message is stored', () => a.inbox.head === 4);
      await a.close();
      a = await startDaemon(tmp.dir, A);
      expect(a.inbox.head).toBe(4);
      expect(a.inbox.size).toBe(4);
      expect(a.logs.some((l) => l.msg === 'moved the inbox out of the local network file')).toBe(false);
      await a.close();
    } finally {
      await b.close();
      tmp.cleanup();
    }
  });
});

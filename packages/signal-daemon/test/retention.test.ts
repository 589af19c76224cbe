import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { memoryLogger } from '@vigil/shared-types';
import Database from 'better-sqlite3';
import { Records } from '../src/localnet/records.js';
import { NetworkRetention } from '../src/localnet/retention.js';
import { NetworkStore } from '../src/localnet/store.js';
import { exited, SseClient, spawnDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const C = '+15550000003';
/** --localnet-retention-hours 0.001: 3.6 s, pruned every second. */
const RETENTION_MS = 3600;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('local network retention', () => {
  it('every table that grows per message stops growing at its retention while messages keep flowing', async () => {
    const tmp = tmpDir();
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const args = (account: string) => [
      '--account',
      account,
      '--http',
      '127.0.0.1:0',
      '--tcp',
      '127.0.0.1:0',
      '--localnet',
      localnet,
      '--data-dir',
      join(tmp.dir, account),
      '--localnet-retention-hours',
      '0.001',
    ];
    // C registers and goes away: its mail is never picked up.
    const c = await spawnDaemon(args(C));
    c.child.kill('SIGTERM');
    await exited(c.child);
    const a = await spawnDaemon(args(A));
    const b = await spawnDaemon(args(B));
    const db = new Database(localnet, { readonly: true });
    try {
      const sse = await SseClient.open(b.http!);
      const sender = await TcpClient.connect(a.tcp!);
      const oldest = {
        sent: db.prepare('SELECT MIN(timestamp) FROM sent_messages').pluck(),
        mail: db.prepare('SELECT MIN(created_at) FROM mailbox').pluck(),
        attachments: db.prepare('SELECT MIN(created_at) FROM attachments').pluck(),
        received: db.prepare('SELECT MIN(received_at) FROM received_attachments').pluck(),
      };
      const count = {
        sent: db.prepare('SELECT COUNT(*) FROM sent_messages').pluck(),
        mail: db.prepare('SELECT COUNT(*) FROM mailbox').pluck(),
        attachments: db.prepare('SELECT COUNT(*) FROM attachments').pluck(),
        received: db.prepare('SELECT COUNT(*) FROM received_attachments').pluck(),
      };
      const ages: Record<keyof typeof oldest, number[]> = { sent: [], mail: [], attachments: [], received: [] };
      const seen: Record<keyof typeof oldest, number> = { sent: 0, mail: 0, attachments: 0, received: 0 };
      // B's files of the attachments it received.
      const files = () => readdirSync(join(tmp.dir, B, 'attachments')).length;
      let filesSeen = 0;
      // Sends flow for five retentions; each goes to B (picked up) and C (left in its mailbox),
      // and every fifth carries an attachment.
      let sent = 0;
      const until = Date.now() + 5 * RETENTION_MS;
      while (Date.now() < until) {
        for (let i = 0; i < 10; i++) {
          sent++;
          const attachment = sent % 5 === 0 ? { attachment: `data:text/plain;base64,${btoa(`a${sent}`)}` } : {};
          const reply = await sender.call('send', { recipient: [B, C], message: `m${sent}`, ...attachment }, sent);
          expect(reply.result?.results?.map((r: { type: string }) => r.type)).toEqual(['SUCCESS', 'SUCCESS']);
        }
        const now = Date.now();
        for (const k of Object.keys(oldest) as (keyof typeof oldest)[]) {
          const min = oldest[k].get() as number | null;
          if (min !== null) ages[k].push(now - min);
          seen[k] = Math.max(seen[k], count[k].get() as number);
        }
        filesSeen = Math.max(filesSeen, files());
        await sleep(20);
      }
      // The retention was reached: the oldest row of each table was older than the retention…
      for (const k of Object.keys(ages) as (keyof typeof ages)[]) {
        expect(Math.max(...ages[k])).toBeGreaterThan(RETENTION_MS);
      }
      // …and in the last half of the run none was ever older than the retention plus a few
      // prune intervals (a loaded machine may delay one), while the rows written kept growing.
      for (const k of Object.keys(ages) as (keyof typeof ages)[]) {
        const late = ages[k].slice(Math.floor(ages[k].length / 2));
        expect(Math.max(...late)).toBeLessThan(RETENTION_MS + 5000);
      }
      // Each send wrote 3 sent rows (author, B, C) and 1 mail row for C: far fewer are left.
      expect(seen.sent).toBeLessThan(3 * sent);
      expect(seen.mail).toBeLessThan(sent);
      // B received sent / 5 attachments: their records and files went with the retention too.
      expect(seen.received).toBeLessThan(sent / 5);
      expect(filesSeen).toBeLessThan(sent / 5);
      // Delivery lost nothing meanwhile.
      await sse.waitFor(sent, 30_000);
      expect(sse.events.length).toBe(sent);
      // Every file left has its record (files go first, then records).
      expect(files()).toBeLessThanOrEqual(count.received.get() as number);
      sse.close();
      sender.close();
    } finally {
      db.close();
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
      await Promise.all([exited(a.child), exited(b.child)]);
      tmp.cleanup();
    }
  }, 90_000);
});

describe('received attachments from an older network file', () => {
  it('gain a time (0: older than any retention), and their records and files go at the first prune', async () => {
    const tmp = tmpDir();
    const file = join(tmp.dir, 'localnet.sqlite');
    const dir = join(tmp.dir, 'attachments');
    mkdirSync(dir);
    // The table as it was, with one record and its file.
    const old = new Database(file);
    old.exec(
      'CREATE TABLE received_attachments (owner TEXT NOT NULL, id TEXT NOT NULL, sender TEXT, group_id TEXT, ' +
        'PRIMARY KEY (owner, id)) WITHOUT ROWID',
    );
    old.prepare('INSERT INTO received_attachments VALUES (?, ?, ?, NULL)').run(B, 'old1', A);
    old.close();
    writeFileSync(join(dir, 'old1'), 'x');
    const store = new NetworkStore(file);
    try {
      const records = new Records(store.db);
      expect(records.attachmentOrigin(B, 'old1')).toEqual({ sender: A, groupId: null });
      records.receivedAttachment(B, 'new1', A, null, Date.now());
      writeFileSync(join(dir, 'new1'), 'y');
      const retention = new NetworkRetention(store.db, (fn) => store.write(fn), RETENTION_MS, memoryLogger(), {
        owner: B,
        dir,
      });
      expect(await retention.pruneOnce()).toBe(1);
      expect(records.attachmentOrigin(B, 'old1')).toBeUndefined();
      expect(records.attachmentOrigin(B, 'new1')).toEqual({ sender: A, groupId: null });
      expect(readdirSync(dir)).toEqual(['new1']);
      await retention.stop();
    } finally {
      await store.close();
      tmp.cleanup();
    }
  });
});

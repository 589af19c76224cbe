/**
 * A full disk under the local network, for real: a small tmpfs (mounting needs root; elsewhere
 * the test says so and does nothing). The daemons answer, log once per episode, do not spin, and
 * recover by themselves when space returns, losing and duplicating nothing.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { until } from '../../../test/support.js';
import { http, rpc, SseClient, spawnDaemon, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';

const t = tmpDir();
const mnt = join(t.dir, 'mnt');
let mounted = false;

beforeAll(() => {
  mkdirSync(mnt);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', mnt], { stdio: 'pipe' });
    mounted = true;
  } catch (err) {
    console.warn(`full-disk test not run: cannot mount a tmpfs here (${String(err).split('\n')[0]})`);
  }
});

afterAll(() => {
  if (mounted) execFileSync('umount', ['-l', mnt]);
  t.cleanup();
});

/** Fills the filesystem until it refuses a byte more. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
    for (let n = 4096; n >= 1; n = Math.floor(n / 2)) {
      try {
        for (;;) writeSync(fd, chunk, 0, n);
      } catch {}
    }
  } finally {
    closeSync(fd);
  }
}

const checkStatus = async (addr: { host: string; port: number }) =>
  (await http(addr, { method: 'GET', path: '/api/v1/check', headers: {} })).status;

describe('a full disk under the local network', () => {
  it('answers -3 and 503, logs once, does not spin, and recovers by itself with nothing lost', async () => {
    if (!mounted) return;
    const localnet = join(mnt, 'localnet.sqlite');
    const common = ['--http', ':0', '--tcp', 'off', '--localnet', localnet];
    const b = await spawnDaemon(['-a', B, ...common, '--data-dir', join(mnt, 'b')]);
    const a = await spawnDaemon(['-a', A, ...common, '--data-dir', join(mnt, 'a')]);
    const sse = await SseClient.open(b.http!);
    try {
      expect((await rpc(a.http!, 'send', { recipient: B, message: 'before' })).result).toBeDefined();
      await sse.waitFor(1);

      // B is away while A sends; then the disk fills up.
      b.child.kill('SIGSTOP');
      for (let i = 0; i < 5; i++) {
        expect((await rpc(a.http!, 'send', { recipient: B, message: `queued ${i}` })).result).toBeDefined();
      }
      // SQLite reuses its WAL file after a checkpoint, so a write can fit in room the file already
      // has on a full disk: empty the network file's and B's inbox's (B is stopped), so that a full
      // disk is full for every write.
      for (const file of [localnet, join(mnt, 'b', 'inbox.sqlite')]) {
        const db = new Database(file);
        db.pragma('wal_checkpoint(TRUNCATE)');
        db.close();
      }
      const filler = join(mnt, 'filler');
      fill(filler);
      const big = 'x'.repeat(60_000); // under the message limit (64 KiB), too big for the full disk
      const failed = await rpc(a.http!, 'send', { recipient: B, message: big });
      expect(failed.error).toMatchObject({ code: -3, message: expect.stringMatching(/full/) });
      expect(await checkStatus(a.http!)).toBe(503);
      expect(((await rpc(a.http!, 'version')) as { result: unknown }).result).toBeDefined();

      // B comes back to a full disk: its delivery fails, once in the log, with no spin.
      b.child.kill('SIGCONT');
      await new Promise((r) => setTimeout(r, 3000));
      const lines = (out: string, text: string) => out.split('\n').filter((l) => l.includes(text)).length;
      // One line for the episode (a spin logged thousands a second and used a whole core).
      expect(lines(b.output(), 'storage is failing')).toBe(1);
      expect(lines(b.output(), 'failed')).toBe(1);
      expect(lines(a.output(), 'storage is failing')).toBe(1);
      expect(await checkStatus(b.http!)).toBe(503);

      // Space returns: both recover by themselves, every queued message arrives once.
      rmSync(filler);
      await until('A serves again', async () => (await checkStatus(a.http!)) === 200, 20_000);
      expect((await rpc(a.http!, 'send', { recipient: B, message: 'after' })).result).toBeDefined();
      await sse.waitFor(7, 20_000);
      const texts = sse.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message);
      expect(texts).toEqual(['before', 'queued 0', 'queued 1', 'queued 2', 'queued 3', 'queued 4', 'after']);
      expect(a.output()).toContain("the local network's storage works again");
    } finally {
      sse.close();
      b.child.kill('SIGCONT');
      a.child.kill('SIGKILL');
      b.child.kill('SIGKILL');
    }
  }, 60_000);
});

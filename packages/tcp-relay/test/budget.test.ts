/**
 * A guest's share (--max-bytes-per-minute): what one source address sends, all its connections
 * together, is slowed to the share (a minute's worth at once, then the steady rate), without
 * losing or reordering a byte; one warning per episode. And the flood of the issue: 7 MB messages
 * from a guest through the relay to a real daemon process are refused (-32602 naming `message`),
 * only the share reaches the daemon, and its disk and memory stay small.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { LineFramer, MESSAGING_LIMITS, memoryLogger } from '@vigil/shared-types';
import { spawnDaemon } from '../../signal-daemon/test/helpers.js';
import { DEFAULT_BYTES_PER_MINUTE, SourceBudget } from '../src/budget.js';
import { relay, tmpDir } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const tmp = tmpDir();
const children: ChildProcess[] = [];
const servers: Server[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const s of servers.splice(0)) {
    s.close();
  }
});
afterAll(() => tmp.cleanup());

/** A target that counts (and drops) what it receives, per connection and in all. */
async function sink(): Promise<{ addr: { host: string; port: number }; received: () => number; bytes: Buffer[] }> {
  let n = 0;
  const bytes: Buffer[] = [];
  const s = createServer((c) => {
    c.on('data', (b: Buffer) => {
      n += b.length;
      if (bytes.length < 1000) bytes.push(b);
    });
    c.on('error', () => {});
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  return { addr: { host: '127.0.0.1', port }, received: () => n, bytes };
}

/** Writes `chunk` again and again while the socket takes it, until stopped. */
function flood(sock: Socket, chunk: Buffer): () => void {
  let on = true;
  const go = () => {
    while (on && sock.write(chunk));
  };
  sock.on('drain', go);
  sock.on('error', () => {});
  go();
  return () => {
    on = false;
  };
}

describe('the per-source byte budget', () => {
  it('is a token bucket: a minute of burst, then the rate; one warning and one recovery line per episode', () => {
    let t = 0;
    const logs: Record<string, unknown>[] = [];
    const b = new SourceBudget(60_000, memoryLogger(logs), () => t);
    expect(b.take('10.0.0.2', 60_000)).toBe(0); // the burst
    expect(b.take('10.0.0.2', 1000)).toBe(1000); // 1 byte a ms: 1000 ms to pay back
    expect(b.take('10.0.0.3', 1000)).toBe(0); // another source has its own share
    expect(b.take('10.0.0.2', 1000)).toBe(2000);
    t = 3000;
    expect(b.take('10.0.0.2', 10)).toBe(0);
    expect(logs.map((l) => l.msg)).toEqual([
      'guest over its byte rate: reading slowed',
      'guest within its byte rate again',
    ]);
    expect(logs[1]).toMatchObject({ source: '10.0.0.2', pauses: 2 });
    expect(new SourceBudget(0, memoryLogger(null)).take('x', 1e12)).toBe(0); // off
    expect(DEFAULT_BYTES_PER_MINUTE).toBe(16 * 1024 * 1024);
  });

  it('slows a source over its share (both its connections together) to the rate, losing nothing', async () => {
    const target = await sink();
    const perMinute = 600 * 1024; // 10 KiB a second
    const r = await relay(target.addr, { refuse: null, maxBytesPerMinute: perMinute });
    const socks = await Promise.all(
      [0, 1].map(
        () =>
          new Promise<Socket>((resolve) => {
            const s = connect(r.addr.port, r.addr.host, () => resolve(s));
          }),
      ),
    );
    const started = performance.now();
    const stops = socks.map((s) => flood(s, Buffer.alloc(64 * 1024, 0x61)));
    // The burst goes through at once...
    const deadline = Date.now() + 20_000;
    while (target.received() < perMinute && Date.now() < deadline) await sleep(20);
    expect(target.received()).toBeGreaterThanOrEqual(perMinute);
    await sleep(2000);
    const elapsedS = (performance.now() - started) / 1000;
    // ...then no more than the rate: a minute's worth, the rate for the time passed, and the chunk
    // each connection had read when its source ran out.
    const bound = perMinute + (perMinute / 60) * elapsedS + 2 * 64 * 1024;
    expect(target.received()).toBeLessThanOrEqual(bound);
    expect(r.logs.filter((l) => l.msg === 'guest over its byte rate: reading slowed')).toHaveLength(1);
    for (const stop of stops) stop();
    // Nothing lost: every byte that reached the target is the guest's, in order ('a's only).
    expect(Buffer.concat(target.bytes).every((b) => b === 0x61)).toBe(true);
    for (const s of socks) s.destroy();
    await r.close();
  });

  it('bounds the flood of 7 MB messages from a guest: refused by the daemon, disk and memory flat', async () => {
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const d = await spawnDaemon([
      '-a',
      '+15550000001',
      '--http',
      '127.0.0.1:0',
      '--tcp',
      '127.0.0.1:0',
      '--localnet',
      localnet,
      '--data-dir',
      join(tmp.dir, 'a'),
    ]);
    children.push(d.child);
    const disk = () =>
      statSync(localnet).size +
      (() => {
        try {
          return statSync(`${localnet}-wal`).size;
        } catch {
          return 0;
        }
      })();
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${d.child.pid}/status`, 'utf8'))![1]) * 1024;
    const diskBefore = disk();
    const rssBefore = rss();
    // The default share, through the filtering relay as installed.
    const r = await relay(d.tcp!, { maxBytesPerMinute: DEFAULT_BYTES_PER_MINUTE, maxLineBytes: 8 * 1024 * 1024 });
    const guest = await new Promise<Socket>((resolve) => {
      const s = connect(r.addr.port, r.addr.host, () => resolve(s));
    });
    const replies: { error?: { code: number; data: { param: string } } }[] = [];
    const framer = new LineFramer({ maxLineBytes: 1024 * 1024 });
    guest.on('data', (c: Buffer) => {
      for (const f of framer.push(c))
        if (f.kind === 'line') replies.push(JSON.parse(Buffer.from(f.bytes).toString('utf8')));
    });
    // 230 messages of 7 MB each (1.6 GB), written as fast as the relay takes them.
    const line = Buffer.from(
      `{"jsonrpc":"2.0","method":"send","params":{"noteToSelf":true,"message":"${'x'.repeat(7 * 1024 * 1024)}"},"id":1}\n`,
    );
    let sent = 0;
    const pump = () => {
      while (sent < 230 && guest.write(line)) sent++;
    };
    guest.on('drain', pump);
    guest.on('error', () => {});
    pump();
    const deadline = Date.now() + 30_000;
    while (replies.length < 2 && Date.now() < deadline) await sleep(50);
    await sleep(3000);
    // Only the share went through: two messages of the burst, maybe a third; each refused.
    expect(replies.length).toBeGreaterThanOrEqual(2);
    expect(replies.length).toBeLessThanOrEqual(3);
    for (const reply of replies) expect(reply.error).toMatchObject({ code: -32602, data: { param: 'message' } });
    expect(MESSAGING_LIMITS.messageBytes).toBeLessThan(7 * 1024 * 1024);
    expect(disk() - diskBefore).toBeLessThan(1024 * 1024);
    expect(rss() - rssBefore).toBeLessThan(200 * 1024 * 1024);
    expect(d.child.exitCode).toBeNull();
    guest.destroy();
    await r.close();
  });
});

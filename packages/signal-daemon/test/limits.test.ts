/**
 * What one request can cost the daemon (issue: a 7 MB message, 7 MB group names, an 80,000-send
 * batch): every text parameter and the attachments of a call are bounded (MESSAGING_LIMITS), a
 * batch is bounded in count and started a slice per event-loop turn, and a bug in one request
 * is answered 500 / -32603 without ending the process. Real daemon processes, real sockets.
 */
import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { type HostPort, MESSAGING_LIMITS, memoryLogger } from '@vigil/shared-types';
import { listen } from '@vigil/shared-types/node';
import type { Inbox } from '../src/inbox.js';
import { BATCH_SLICE, Dispatcher } from '../src/rpc.js';
import { HttpTransport } from '../src/transports/http.js';
import { TcpTransport } from '../src/transports/tcp.js';
import { http, rpc, spawnDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const MB7 = 'x'.repeat(7 * 1024 * 1024);

const children: ChildProcess[] = [];
const tmp = tmpDir();
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});
afterAll(() => tmp.cleanup());

async function daemon(name: string, args: string[] = []) {
  const localnet = join(tmp.dir, `${name}.sqlite`);
  const d = await spawnDaemon([
    '-a',
    A,
    '--http',
    '127.0.0.1:0',
    '--tcp',
    '127.0.0.1:0',
    '--localnet',
    localnet,
    '--data-dir',
    join(tmp.dir, name),
    ...args,
  ]);
  children.push(d.child);
  return { ...d, localnet };
}

/** The local network's bytes on disk (the database and its write-ahead log). */
function diskBytes(file: string): number {
  let n = 0;
  for (const f of [file, `${file}-wal`]) {
    try {
      n += statSync(f).size;
    } catch {
      // not there
    }
  }
  return n;
}

describe('sizes of what one call carries', () => {
  it('refuses a 7 MB message with -32602 naming message over HTTP and TCP, stores nothing, and stays up', async () => {
    const d = await daemon('big-message');
    const before = diskBytes(d.localnet);
    const http1 = await rpc(d.http!, 'send', { noteToSelf: true, message: MB7 });
    expect(http1.error).toEqual({
      code: -32602,
      message: `Invalid params: message is too large: ${MB7.length} bytes, at most ${MESSAGING_LIMITS.messageBytes}`,
      data: { param: 'message', size: MB7.length, limit: MESSAGING_LIMITS.messageBytes },
    });
    const tcp = await TcpClient.connect(d.tcp!);
    try {
      const r = await tcp.call('send', { 'note-to-self': true, message: MB7 }, 7);
      expect(r).toMatchObject({ id: 7, error: { code: -32602, data: { param: 'message' } } });
      // Multi-byte text is counted in bytes: 30,000 characters of 3 bytes are over 64 KiB.
      const wide = await tcp.call('send', { noteToSelf: true, message: '表'.repeat(30_000) }, 8);
      expect(wide.error).toMatchObject({ code: -32602, data: { param: 'message', size: 90_000 } });
      // At the limit: sent.
      const fits = await tcp.call('send', { noteToSelf: true, message: 'y'.repeat(MESSAGING_LIMITS.messageBytes) }, 9);
      expect(fits.result.timestamp).toEqual(expect.any(Number));
    } finally {
      tcp.close();
    }
    expect(diskBytes(d.localnet) - before).toBeLessThan(1024 * 1024);
    expect((await rpc(d.http!, 'version')).result.version).toEqual(expect.any(String));
    expect(d.child.exitCode).toBeNull();
  });

  it('bounds group names and descriptions, profile fields, contact names and the number of attachments', async () => {
    const d = await daemon('fields');
    const cases: [string, Record<string, unknown>, string][] = [
      ['updateGroup', { name: MB7 }, 'name'],
      ['updateGroup', { name: 'ok', description: 'd'.repeat(MESSAGING_LIMITS.descriptionBytes + 1) }, 'description'],
      ['updateProfile', { 'given-name': 'n'.repeat(MESSAGING_LIMITS.nameBytes + 1) }, 'given-name'],
      ['updateProfile', { about: 'a'.repeat(MESSAGING_LIMITS.aboutBytes + 1) }, 'about'],
      ['updateContact', { recipient: '+15550000002', note: MB7 }, 'note'],
      ['sendReaction', { recipient: A, emoji: MB7, targetAuthor: A, targetTimestamp: 1 }, 'emoji'],
      [
        'send',
        { noteToSelf: true, attachments: Array.from({ length: 33 }, () => 'data:text/plain;base64,eA==') },
        'attachments',
      ],
    ];
    for (const [method, params, named] of cases) {
      const r = await rpc(d.http!, method, params);
      expect({ method, error: r.error }).toMatchObject({ method, error: { code: -32602, data: { param: named } } });
      expect(r.error.message).toContain(`Invalid params: ${named} is too large`);
    }
    // Within the limits, the same calls work: the group is there with its name, and listGroups stays small.
    const made = await rpc(d.http!, 'updateGroup', { name: 'g'.repeat(MESSAGING_LIMITS.nameBytes) });
    expect(made.result.groupId).toEqual(expect.any(String));
    const groups = await http(d.http!, { body: JSON.stringify({ jsonrpc: '2.0', method: 'listGroups', id: 1 }) });
    expect(groups.text.length).toBeLessThan(16 * 1024);
  });
});

describe('batches', () => {
  it('refuses an 80,000-send batch whole with -32600 on HTTP and TCP, sends nothing, and keeps serving', async () => {
    const d = await daemon('batch');
    const before = diskBytes(d.localnet);
    const batch = Array.from({ length: 80_000 }, (_, i) => ({
      jsonrpc: '2.0',
      method: 'send',
      params: { noteToSelf: true, message: `m${i}` },
      id: i,
    }));
    const body = JSON.stringify(batch);
    expect(Buffer.byteLength(body)).toBeLessThan(8 * 1024 * 1024); // it is the count that is refused
    const refused = {
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32600,
        message: `Batch too large: 80000 requests, at most ${MESSAGING_LIMITS.batchRequests} in one batch`,
        data: { count: 80_000, limit: MESSAGING_LIMITS.batchRequests },
      },
    };
    const r = await http(d.http!, { body });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual(refused);
    const tcp = await TcpClient.connect(d.tcp!);
    try {
      tcp.write(`${body}\n`);
      expect(await tcp.next(30_000)).toEqual(refused);
      // The connection goes on, and a batch at the limit is answered in full.
      const max = Array.from({ length: MESSAGING_LIMITS.batchRequests }, (_, i) => ({
        jsonrpc: '2.0',
        method: 'version',
        id: i,
      }));
      tcp.write(`${JSON.stringify(max)}\n`);
      const replies = (await tcp.next(30_000)) as { id: number }[];
      expect(replies.map((x) => x.id).sort((x, y) => x - y)).toEqual(max.map((x) => x.id));
    } finally {
      tcp.close();
    }
    expect(diskBytes(d.localnet) - before).toBeLessThan(256 * 1024);
    expect(d.child.exitCode).toBeNull();
  });

  it('starts a long batch a slice per event-loop turn, so that other work runs between slices', async () => {
    const started: number[] = [];
    const dispatcher = new Dispatcher(memoryLogger(null), 1000);
    const items = Array.from({ length: 1000 }, (_, i) => ({ kind: 'call' as const, id: i, method: 'm', params: i }));
    const reply = dispatcher.dispatch({ kind: 'batch', items }, (_m, p) => {
      started.push(p as number);
      return p;
    });
    // Another client's turn: it comes after the first slice, long before the last.
    const seenByOthers = await new Promise<number>((resolve) => setImmediate(() => resolve(started.length)));
    expect(seenByOthers).toBeGreaterThan(0);
    expect(seenByOthers).toBeLessThanOrEqual(2 * BATCH_SLICE);
    const all = (await reply) as { id: number; result: number }[];
    expect(all).toHaveLength(1000);
    expect(all.every((r) => r.id === r.result)).toBe(true);
    expect(started).toEqual(items.map((x) => x.id)); // in order
  });
});

describe('the last resort: a bug in one request', () => {
  const logs: Record<string, unknown>[] = [];
  const logger = memoryLogger(logs);
  const inbox = new EventEmitter() as unknown as Inbox;

  it('is answered 500 (-32603 on the RPC path) over HTTP, logged, and the next request is served', async () => {
    let buggy = true;
    let later = false;
    // A dispatcher whose reply cannot be serialised (at once, or later), and a status that throws.
    const dispatcher = {
      dispatch: () => {
        const reply = { jsonrpc: '2.0', id: 1, result: buggy ? 1n : 1 };
        return later ? new Promise((r) => setTimeout(() => r(reply), 10)) : reply;
      },
    } as unknown as Dispatcher;
    const t = new HttpTransport({
      bindHost: '127.0.0.1',
      allowOrigins: new Set(),
      maxRequestBytes: 1024,
      maxStreams: 1,
      inbox,
      dispatcher,
      invoke: () => null,
      serving: () => true,
      status: () => {
        throw new Error('status bug');
      },
      logger,
    });
    const addr: HostPort = await listen(t.server, { host: '127.0.0.1', port: 0 }, 'HTTP');
    try {
      const body = JSON.stringify({ jsonrpc: '2.0', method: 'version', id: 1 });
      const r = await http(addr, { body });
      expect(r.status).toBe(500);
      expect(r.json()).toEqual({
        jsonrpc: '2.0',
        id: null,
        error: { code: -32603, message: 'Internal error', data: null },
      });
      later = true; // the reply of a method that answers later: the same
      const r2 = await http(addr, { body });
      expect(r2.status).toBe(500);
      expect(r2.json()).toMatchObject({ error: { code: -32603 } });
      const check = await http(addr, { method: 'GET', path: '/api/v1/check', headers: { accept: 'application/json' } });
      expect(check.status).toBe(500);
      expect(check.text).toBe('Internal Server Error\n');
      buggy = false;
      expect((await http(addr, { body })).json()).toEqual({ jsonrpc: '2.0', id: 1, result: 1 });
      expect(logs.filter((l) => l.msg === 'request failed')).toHaveLength(3);
    } finally {
      t.server.close();
    }
  });

  it('is answered -32603 over TCP, and the connection and the listener go on', async () => {
    let buggy = true;
    let later = false;
    const dispatcher = {
      dispatch: () => {
        const reply = { jsonrpc: '2.0', id: 1, result: buggy ? 1n : 1 };
        return later ? new Promise((r) => setTimeout(() => r(reply), 10)) : reply;
      },
    } as unknown as Dispatcher;
    const t = new TcpTransport({
      maxLineBytes: 1024,
      maxConnections: 4,
      maxConnectionsPerSource: 4,
      idleTimeoutMs: 0,
      receiveMode: 'manual',
      inbox,
      dispatcher,
      invoke: () => () => null,
      logger,
    });
    const addr: HostPort = await listen(t.server, { host: '127.0.0.1', port: 0 }, 'TCP');
    const c = await TcpClient.connect(addr);
    try {
      const internal = { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'Internal error', data: null } };
      expect(await c.call('version')).toEqual(internal);
      later = true;
      expect(await c.call('version')).toEqual(internal);
      buggy = false;
      expect(await c.call('version')).toEqual({ jsonrpc: '2.0', id: 1, result: 1 });
    } finally {
      c.close();
      t.closeConnections();
      t.server.close();
    }
  });
});

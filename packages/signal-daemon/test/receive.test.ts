/**
 * `receive`, manual mode's polling method: what arrived since the poller's last `receive`, in
 * order and once; `maxMessages` and `timeout` as signal-cli; -1 when the connection receives
 * notifications already; a poller is a consumer of its own (an SSE consumer still gets
 * everything). Real daemons of two accounts on one network file, over HTTP and TCP.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DaemonHandle } from '../src/index.js';
import { rpc, SseClient, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550032001';
const B = '+15550032002';
const C = '+15550032003';
const ALREADY = 'Receive command cannot be used if messages are already being received.';

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Received = { envelope: { source: string; dataMessage?: { message?: string } }; account: string };
const texts = (result: Received[]) => result.map((r) => r.envelope.dataMessage?.message);

describe('receive (polling)', () => {
  const tmp = tmpDir();
  let a: DaemonHandle;
  let b: DaemonHandle;
  let c: DaemonHandle;
  let n = 0;

  /** B sends each text to A; resolves when A's inbox has them all. */
  const sendToA = async (...messages: string[]) => {
    for (const message of messages) {
      const r = await rpc(b.http!, 'send', { recipient: A, message });
      expect(r.error).toBeUndefined();
    }
    n += messages.length;
    await until(`A holds ${n} messages`, () => a.inbox.head >= n);
  };

  beforeAll(async () => {
    // A in manual mode (a TCP connection receives only after subscribeReceive), C in on-start mode.
    a = await startDaemon(tmp.dir, A, { receiveMode: 'manual', consumers: ['script'] });
    b = await startDaemon(tmp.dir, B);
    c = await startDaemon(tmp.dir, C);
  });

  afterAll(async () => {
    await Promise.all([a.close(), b.close(), c.close()]);
    tmp.cleanup();
  });

  it('returns what arrived while nobody polled, in order, once; then only newer messages', async () => {
    await sendToA('one', 'two', 'three');
    const first = await rpc(a.http!, 'receive', { timeout: 0 });
    expect(texts(first.result)).toEqual(['one', 'two', 'three']);
    expect(first.result[0]).toMatchObject({ account: A, envelope: { source: B, sourceNumber: B } });
    expect((await rpc(a.http!, 'receive', { timeout: 0 })).result).toEqual([]);
    await sendToA('four');
    const tcp = await TcpClient.connect(a.tcp!);
    try {
      expect(texts((await tcp.call('receive', { timeout: 0 })).result)).toEqual(['four']);
    } finally {
      tcp.close();
    }
  });

  it('bounds the batch with maxMessages (camelCase and dashed)', async () => {
    await sendToA('m1', 'm2', 'm3', 'm4', 'm5');
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0, maxMessages: 2 })).result)).toEqual(['m1', 'm2']);
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0, 'max-messages': 1 })).result)).toEqual(['m3']);
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0, 'max-messages': -1 })).result)).toEqual(['m4', 'm5']);
  });

  it('waits up to timeout and returns a message that arrives meanwhile', async () => {
    const tcp = await TcpClient.connect(a.tcp!);
    try {
      let answered = false;
      const waiting = tcp.call('receive', { timeout: 60 }).then((r) => {
        answered = true;
        return r;
      });
      await sleep(300);
      expect(answered).toBe(false);
      await sendToA('late');
      expect(texts((await waiting).result)).toEqual(['late']);
      // Nothing arrives: an empty array once the timeout passes.
      expect((await rpc(a.http!, 'receive', { timeout: 0.2 })).result).toEqual([]);
    } finally {
      tcp.close();
    }
  });

  it('gives up a wait when the caller goes, and refuses a second poll of the same consumer meanwhile', async () => {
    const first = await TcpClient.connect(a.tcp!);
    first.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'receive', params: { timeout: -1 }, id: 1 })}\n`);
    await sleep(200);
    const busy = await rpc(a.http!, 'receive', { timeout: 0 });
    expect(busy.error).toMatchObject({ code: -1, message: ALREADY });
    first.close();
    // The wait ended with the connection: the consumer polls again, and what arrives is kept for it.
    let again: { result?: unknown; error?: unknown } = {};
    for (let i = 0; i < 100; i++) {
      again = await rpc(a.http!, 'receive', { timeout: 0 });
      if (!again.error) break;
      await sleep(50);
    }
    expect(again).toMatchObject({ result: [] });
    await sendToA('kept');
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0 })).result)).toEqual(['kept']);
  });

  it('gives up a wait over HTTP when the client goes', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'receive', params: { timeout: -1 }, id: 1 });
    const req = request({
      host: a.http!.host,
      port: a.http!.port,
      path: '/api/v1/rpc',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      agent: false,
    });
    req.on('error', () => {});
    req.end(body);
    await sleep(200);
    expect((await rpc(a.http!, 'receive', { timeout: 0 })).error).toMatchObject({ code: -1, message: ALREADY });
    req.destroy();
    let again: { result?: unknown; error?: unknown } = {};
    for (let i = 0; i < 100 && !('result' in again); i++) {
      again = await rpc(a.http!, 'receive', { timeout: 0 });
      if (again.error) await sleep(50);
    }
    expect(again).toMatchObject({ result: [] });
  });

  it('answers -1 as signal-cli on a connection that receives notifications', async () => {
    const tcp = await TcpClient.connect(a.tcp!);
    try {
      expect((await tcp.call('subscribeReceive', {})).result).toBe(0);
      expect((await tcp.call('receive', { timeout: 0 }, 2)).error).toMatchObject({ code: -1, message: ALREADY });
    } finally {
      tcp.close();
    }
    // on-start mode: every TCP connection receives.
    const onStart = await TcpClient.connect(c.tcp!);
    try {
      expect((await onStart.call('receive', { timeout: 0 })).error).toMatchObject({ code: -1, message: ALREADY });
    } finally {
      onStart.close();
    }
    // HTTP has no notifications: it polls.
    expect((await rpc(c.http!, 'receive', { timeout: 0 })).result).toEqual(expect.any(Array));
  });

  it('takes nothing from an SSE consumer: each gets every message', async () => {
    await rpc(a.http!, 'receive', { timeout: 0 });
    const sse = await SseClient.open(a.http!);
    try {
      await sendToA('fan-1', 'fan-2', 'fan-3');
      await sse.waitFor(3);
      expect(sse.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual([
        'fan-1',
        'fan-2',
        'fan-3',
      ]);
      expect(texts((await rpc(a.http!, 'receive', { timeout: 0 })).result)).toEqual(['fan-1', 'fan-2', 'fan-3']);
      expect(sse.events).toHaveLength(3);
    } finally {
      sse.close();
    }
  });

  it('keeps a named consumer apart, and refuses bad params with -32602 naming them', async () => {
    await sendToA('named');
    const bad = await rpc(a.http!, 'receive', { consumer: 'nobody' });
    expect(bad.error).toMatchObject({ code: -32602, message: expect.stringContaining('unknown consumer "nobody"') });
    // Each consumer has its own mark: `script` (new: after what any consumer read) and `poll` both get "named".
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0, consumer: 'script' })).result)).toEqual(['named']);
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0 })).result)).toEqual(['named']);
    await sendToA('both');
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0, consumer: 'script' })).result)).toEqual(['both']);
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0 })).result)).toEqual(['both']);
    const cases: [Record<string, unknown>, string][] = [
      [{ timeout: '1' }, 'timeout'],
      [{ 'max-messages': 'all' }, 'max-messages'],
      [{ maxMessages: 2.5 }, 'maxMessages'],
      [{ 'ignore-stories': 'yes' }, 'ignore-stories'],
      [{ sendReadReceipts: true }, 'sendReadReceipts'],
      [{ 'send-read-receipts': true }, 'send-read-receipts'],
    ];
    for (const [params, name] of cases) {
      const r = await rpc(a.http!, 'receive', params);
      expect(r.error).toMatchObject({ code: -32602, message: expect.stringContaining(name) });
    }
    const arrayParams = await rpc(a.http!, 'receive', [1]);
    expect(arrayParams.error).toMatchObject({ code: -32602 });
    // The flags with nothing to do are accepted.
    const flags = { timeout: 0, ignoreAttachments: true, 'ignore-avatars': true, ignoreStickers: true };
    expect((await rpc(a.http!, 'receive', flags)).result).toEqual([]);
  });
  it('polls as the relay consumer on a connection from the relay source address', async () => {
    await sendToA('via-relay');
    const relay = await TcpClient.connect(a.tcp!, '127.0.0.2');
    try {
      expect(texts((await relay.call('receive', { timeout: 0 })).result)).toEqual(['via-relay']);
      expect((await relay.call('receive', { timeout: 0 }, 2)).result).toEqual([]);
    } finally {
      relay.close();
    }
    // The relay's poll took nothing from `poll`.
    expect(texts((await rpc(a.http!, 'receive', { timeout: 0 })).result)).toEqual(['via-relay']);
  });
  it('ends a wait at shutdown with an answer, so the daemon stops at once', async () => {
    const d = await startDaemon(tmp.dir, '+15550032004', { shutdownGraceMs: 60_000 });
    const waiting = rpc(d.http!, 'receive', { timeout: -1 });
    await sleep(200);
    await d.close();
    expect((await waiting).result).toEqual([]);
  });
});

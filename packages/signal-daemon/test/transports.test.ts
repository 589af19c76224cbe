import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DaemonHandle } from '../src/index.js';
import { http, rpc, SseClient, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const json = { 'content-type': 'application/json' };

describe('HTTP transport', () => {
  const tmp = tmpDir();
  let d: DaemonHandle;

  beforeAll(async () => {
    d = await startDaemon(tmp.dir, A, { maxRequestBytes: 4096 });
  });
  afterAll(async () => {
    await d.close();
    tmp.cleanup();
  });

  it('answers every JSON-RPC reply, errors included, with 200 application/json', async () => {
    const ok = await http(d.http!, { body: '{"jsonrpc":"2.0","method":"version","id":1}' });
    expect(ok.status).toBe(200);
    expect(ok.headers['content-type']).toBe('application/json');
    const err = await http(d.http!, { body: '{"jsonrpc":"2.0","method":"nope","id":2}' });
    expect(err.status).toBe(200);
    expect(err.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method not implemented', data: null },
      id: 2,
    });
  });

  it('answers -32700 itself for malformed JSON (not an HTML 400 page)', async () => {
    const r = await http(d.http!, { body: '{"jsonrpc":"2.0",' });
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32700, data: null }, id: null });
    const bad = await http(d.http!, { body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) });
    expect(bad.json()).toMatchObject({ error: { code: -32700, message: expect.stringContaining('UTF-8') } });
  });

  it('answers 201 with an empty body when no reply is due', async () => {
    const note = await http(d.http!, { body: '{"jsonrpc":"2.0","method":"version"}' });
    expect(note.status).toBe(201);
    expect(note.text).toBe('');
    const allNotes = await http(d.http!, {
      body: '[{"jsonrpc":"2.0","method":"version"},{"jsonrpc":"2.0","method":"listGroups"}]',
    });
    expect(allNotes.status).toBe(201);
    expect(allNotes.text).toBe('');
  });

  it('treats an explicit null id as a call, not a notification', async () => {
    const r = await http(d.http!, { body: '{"jsonrpc":"2.0","method":"version","id":null}' });
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({ result: { version: expect.any(String) }, id: null });
  });

  it('answers batches element by element; invalid elements get id null; [] is one -32600', async () => {
    const r = await http(d.http!, {
      body: JSON.stringify([
        { jsonrpc: '2.0', method: 'version', id: 'a' },
        { jsonrpc: '2.0', method: 'version' },
        42,
        { jsonrpc: '2.0', id: 'b' },
        { jsonrpc: '2.0', method: 'nope', id: 'c' },
      ]),
    });
    expect(r.status).toBe(200);
    expect(r.json()).toEqual([
      { jsonrpc: '2.0', result: { version: expect.any(String) }, id: 'a' },
      { jsonrpc: '2.0', error: { code: -32600, message: 'request must be a JSON object', data: null }, id: null },
      { jsonrpc: '2.0', error: { code: -32600, message: 'method field must be set', data: null }, id: 'b' },
      { jsonrpc: '2.0', error: { code: -32601, message: 'Method not implemented', data: null }, id: 'c' },
    ]);
    const empty = await http(d.http!, { body: '[]' });
    expect(empty.json()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'empty batch', data: null },
      id: null,
    });
  });

  it('answers 405 for other methods on the RPC path and 415 for other content types', async () => {
    const get = await http(d.http!, { method: 'GET' });
    expect(get.status).toBe(405);
    expect(get.headers.allow).toBe('POST');
    expect((await http(d.http!, { method: 'PUT', body: '{}' })).status).toBe(405);
    expect((await http(d.http!, { method: 'POST', path: '/api/v1/events' })).status).toBe(405);
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', '']) {
      const r = await http(d.http!, {
        headers: type ? { 'content-type': type } : {},
        body: '{"jsonrpc":"2.0","method":"version","id":1}',
      });
      expect(r.status).toBe(415);
    }
    const charset = await http(d.http!, {
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: '{"jsonrpc":"2.0","method":"version","id":1}',
    });
    expect(charset.status).toBe(200);
  });

  it('answers 404 for every other path, the retired REST paths included', async () => {
    for (const path of ['/', '/v1/about', '/api/v1/accounts', '/api/v1/rpc/x', '/api/v2/rpc']) {
      expect((await http(d.http!, { method: 'GET', path })).status).toBe(404);
    }
  });

  it('answers subscribeReceive over HTTP with -32601, as signal-cli', async () => {
    expect((await rpc(d.http!, 'subscribeReceive')).error.code).toBe(-32601);
  });

  it('refuses a body over the limit with 413 and a JSON-RPC error, and keeps serving', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', method: 'send', params: { message: 'x'.repeat(5000) }, id: 1 });
    const r = await http(d.http!, { body: big });
    expect(r.status).toBe(413);
    expect(r.json()).toMatchObject({ error: { code: -32600, message: expect.stringContaining('4096 bytes') } });
    expect((await rpc(d.http!, 'version')).result.version).toBeDefined();
  });

  it('refuses a foreign Host header with 421 and accepts loopback names', async () => {
    const body = '{"jsonrpc":"2.0","method":"version","id":1}';
    const evil = await http(d.http!, { headers: { ...json, host: 'evil.example:8080' }, body });
    expect(evil.status).toBe(421);
    for (const host of ['localhost:8080', '127.0.0.1', `127.0.0.1:${d.http!.port}`, '[::1]:8080']) {
      expect((await http(d.http!, { headers: { ...json, host }, body })).status).toBe(200);
    }
  });

  it('answers the check endpoint: 200 empty, or a JSON status on request', async () => {
    const plain = await http(d.http!, { method: 'GET', path: '/api/v1/check', headers: {} });
    expect(plain.status).toBe(200);
    expect(plain.text).toBe('');
    const status = await http(d.http!, {
      method: 'GET',
      path: '/api/v1/check',
      headers: { accept: 'application/json' },
    });
    expect(status.json()).toEqual({
      version: expect.any(String),
      signalCliInterface: '0.14.6',
      account: A,
      backend: { kind: 'local', state: 'serving' },
      uptimeS: expect.any(Number),
      consumers: {
        sse: 0,
        tcp: 0,
        list: [{ name: 'sse', connected: false, connections: 0, held: 0, oldestHeldAgeS: null, lastSeenAt: null }],
      },
      lastOutboundSendAt: null,
      lastInboundMessageAt: null,
      messages: { sent: 0, received: 0 },
    });
  });

  it('counts messages sent and received in the JSON status', async () => {
    const b = await startDaemon(tmp.dir, B);
    try {
      const counts = async (addr: typeof b.http) =>
        (
          (
            await http(addr!, { method: 'GET', path: '/api/v1/check', headers: { accept: 'application/json' } })
          ).json() as { messages: { sent: number; received: number } }
        ).messages;
      const before = await counts(d.http);
      for (const m of ['one', 'two']) {
        expect((await rpc(d.http!, 'send', { recipient: B, message: m })).result.results[0].type).toBe('SUCCESS');
      }
      // A failed call is no send.
      await rpc(d.http!, 'send', { message: 'no recipient' });
      expect(await counts(d.http)).toEqual({ sent: before.sent + 2, received: before.received });
      const deadline = Date.now() + 20_000;
      while ((await counts(b.http)).received < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await counts(b.http)).toEqual({ sent: 0, received: 2 });
    } finally {
      await b.close();
    }
  });
});

describe('TCP transport', () => {
  const tmp = tmpDir();
  let d: DaemonHandle;
  let other: DaemonHandle;

  beforeAll(async () => {
    d = await startDaemon(tmp.dir, A, { maxRequestBytes: 300_000, linkTimeoutMs: 500 });
    other = await startDaemon(tmp.dir, B);
  });
  afterAll(async () => {
    await d.close();
    await other.close();
    tmp.cleanup();
  });

  it('answers lines ending in \\n or \\r\\n, and splits anywhere', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.write('{"jsonrpc":"2.0","method":"version","id":1}\r\n{"jsonrpc":"2.0","meth');
    expect(await c.next()).toMatchObject({ id: 1, result: { version: expect.any(String) } });
    c.write('od":"version","id":2}\n');
    expect(await c.next()).toMatchObject({ id: 2 });
    c.close();
  });

  it('ends a line at a lone \\r as signal-cli does (Java readLine), and a \\r\\n split between reads is one line end', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.write('{"jsonrpc":"2.0","method":"version","id":"cr1"}\r{"jsonrpc":"2.0","method":"version","id":"cr2"}\r');
    // Answered at once: the lone \r is not held back waiting for a \n.
    expect([(await c.next()).id, (await c.next()).id].sort()).toEqual(['cr1', 'cr2']);
    await new Promise((r) => setTimeout(r, 30));
    c.write('\n{"jsonrpc":"2.0","method":"version","id":"cr3"}\n');
    // The \n completing the \r\n is no empty line (that would be a -32700 reply first).
    expect(await c.next()).toMatchObject({ id: 'cr3', result: {} });
    c.write('\r');
    expect((await c.next()).error).toEqual({ code: -32700, message: 'Empty input line', data: null });
    c.close();
  });

  it('answers an empty line with -32700 "Empty input line" and survives every error', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.write('\n');
    expect(await c.next()).toEqual({
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Empty input line', data: null },
      id: null,
    });
    c.write(Buffer.from([0xc3, 0x28, 0x0a])); // invalid UTF-8
    expect((await c.next()).error.code).toBe(-32700);
    c.write(`${'['.repeat(100_000)}${']'.repeat(100_000)}\n`); // absurd nesting: a batch of one invalid element
    expect(await c.next()).toEqual([
      { jsonrpc: '2.0', error: { code: -32600, message: 'request must be a JSON object', data: null }, id: null },
    ]);
    c.write('{not json}\n[]\n{"jsonrpc":"2.0","method":"nope","id":"z"}\n');
    expect((await c.next()).error.code).toBe(-32700);
    expect((await c.next()).error).toEqual({ code: -32600, message: 'empty batch', data: null });
    expect(await c.next()).toMatchObject({ id: 'z', error: { code: -32601 } });
    expect(await c.call('version', undefined, 'still')).toMatchObject({ id: 'still', result: {} });
    c.close();
  });

  it('answers an over-long line with a clear error and goes on', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.write(`${'x'.repeat(400_000)}\n{"jsonrpc":"2.0","method":"version","id":9}\n`);
    expect(await c.next()).toMatchObject({
      error: { code: -32600, message: expect.stringContaining('300000 bytes') },
      id: null,
    });
    expect(await c.next()).toMatchObject({ id: 9, result: {} });
    c.close();
  });

  it('gives notifications no reply and batches one reply line', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.write(
      '{"jsonrpc":"2.0","method":"version"}\n[{"jsonrpc":"2.0","method":"version","id":1},{"jsonrpc":"2.0","method":"version"}]\n',
    );
    expect(await c.next()).toEqual([{ jsonrpc: '2.0', result: { version: expect.any(String) }, id: 1 }]);
    await new Promise((r) => setTimeout(r, 100));
    expect(c.pending).toBe(0);
    c.close();
  });

  it('answers 300 lines written at once, each once and in order, errors and a waiting call among them', async () => {
    const c = await TcpClient.connect(d.tcp!);
    const lines: string[] = [];
    for (let i = 1; i <= 300; i++) {
      if (i === 100)
        lines.push('{"jsonrpc":"2.0","method":"version","id":100'); // broken JSON
      else if (i === 200) lines.push(JSON.stringify({ jsonrpc: '2.0', method: 'listContacts', id: 200 }));
      else lines.push(JSON.stringify({ jsonrpc: '2.0', method: i % 7 === 0 ? 'noSuchMethod' : 'version', id: i }));
    }
    c.write(`${lines.join('\n')}\n`);
    const replies = [];
    for (let i = 0; i < 300; i++) replies.push(await c.next());
    // The one call that waits (a database read) may come after later calls answered at once.
    const byId = new Map(replies.map((r) => [r.id, r]));
    expect(replies.filter((r) => r.id === null)).toHaveLength(1);
    expect(replies.find((r) => r.id === null)).toMatchObject({ error: { code: -32700 } });
    expect(byId.get(200)).toMatchObject({ result: expect.any(Array) });
    const quick = replies.filter((r) => r.id !== null && r.id !== 200).map((r) => r.id);
    expect(quick).toEqual([...Array(300).keys()].map((i) => i + 1).filter((i) => i !== 100 && i !== 200));
    for (const id of quick) {
      expect(byId.get(id)).toMatchObject(
        id % 7 === 0 ? { error: { code: -32601 } } : { result: { version: expect.any(String) } },
      );
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(c.pending).toBe(0);
    c.close();
  });

  it('replies in completion order: a fast call is not held behind a slow one', async () => {
    const c = await TcpClient.connect(d.tcp!);
    const uri = (await c.call('startLink', undefined, 'l')).result.deviceLinkUri;
    c.write(
      `${JSON.stringify({ jsonrpc: '2.0', method: 'finishLink', params: { deviceLinkUri: uri }, id: 'slow' })}\n`,
    );
    c.write('{"jsonrpc":"2.0","method":"version","id":"fast"}\n');
    expect((await c.next()).id).toBe('fast');
    expect((await c.next(5000)).id).toBe('slow');
    c.close();
  });

  it('still replies to a client that half-closes after its request', async () => {
    const c = await TcpClient.connect(d.tcp!);
    c.socket.end('{"jsonrpc":"2.0","method":"version","id":"half"}');
    expect(await c.next()).toMatchObject({ id: 'half', result: {} });
    c.close();
  });

  it('sends receive notifications to every connection in on-start mode', async () => {
    const c1 = await TcpClient.connect(d.tcp!);
    const c2 = await TcpClient.connect(d.tcp!);
    await c1.call('version'); // both connected and registered
    await c2.call('version');
    await rpc(other.http!, 'send', { recipient: A, message: 'to every connection' });
    for (const c of [c1, c2]) {
      expect(await c.next()).toMatchObject({
        jsonrpc: '2.0',
        method: 'receive',
        params: { account: A, envelope: { sourceNumber: B, dataMessage: { message: 'to every connection' } } },
      });
    }
    c1.close();
    c2.close();
  });
});

describe('manual receive mode', () => {
  it('sends notifications only after subscribeReceive, wrapped with the subscription id, until unsubscribed', async () => {
    const tmp = tmpDir();
    const d = await startDaemon(tmp.dir, A, { receiveMode: 'manual' });
    const sender = await startDaemon(tmp.dir, B);
    try {
      const c = await TcpClient.connect(d.tcp!);
      const sse = await SseClient.open(d.http!);
      await rpc(sender.http!, 'send', { recipient: A, message: 'before' });
      await sse.waitFor(1);
      await new Promise((r) => setTimeout(r, 50));
      expect(c.pending).toBe(0);
      const sub = await c.call('subscribeReceive', undefined, 's');
      expect(sub).toEqual({ jsonrpc: '2.0', result: 0, id: 's' });
      await rpc(sender.http!, 'send', { recipient: A, message: 'after' });
      expect(await c.next()).toMatchObject({
        method: 'receive',
        params: { subscription: 0, result: { account: A, envelope: { dataMessage: { message: 'after' } } } },
      });
      expect(await c.call('unsubscribeReceive', { subscription: 0 }, 'u')).toEqual({
        jsonrpc: '2.0',
        result: {},
        id: 'u',
      });
      // Unknown and missing subscriptions are user errors (-1), with signal-cli's messages.
      expect((await c.call('unsubscribeReceive', { subscription: 0 }, 'u2')).error).toEqual({
        code: -1,
        message: 'Unknown subscription id',
        data: null,
      });
      expect((await c.call('unsubscribeReceive', {}, 'u3')).error).toEqual({
        code: -1,
        message: 'Missing subscription parameter with subscription id',
        data: null,
      });
      expect((await c.call('unsubscribeReceive', undefined, 'u4')).error.code).toBe(-1);
      expect((await c.call('unsubscribeReceive', [7], 'u5')).error.message).toBe('Unknown subscription id');
      await rpc(sender.http!, 'send', { recipient: A, message: 'ignored' });
      await sse.waitFor(3);
      await new Promise((r) => setTimeout(r, 50));
      expect(c.pending).toBe(0);
      c.close();
      sse.close();
    } finally {
      await d.close();
      await sender.close();
      tmp.cleanup();
    }
  });
});

describe('a backend that cannot serve', () => {
  it('makes the check endpoint answer 503 and calls fail at once with -3', async () => {
    const tmp = tmpDir();
    const d = await startDaemon(tmp.dir, A);
    try {
      await d.backend.close();
      const check = await http(d.http!, {
        method: 'GET',
        path: '/api/v1/check',
        headers: { accept: 'application/json' },
      });
      expect(check.status).toBe(503);
      expect(check.json()).toMatchObject({ backend: { kind: 'local', state: 'down' } });
      expect((await rpc(d.http!, 'send', { recipient: B, message: 'x' })).error.code).toBe(-3);
      // The daemon's own methods still answer.
      expect((await rpc(d.http!, 'version')).result).toBeDefined();
    } finally {
      await d.close();
      tmp.cleanup();
    }
  });
});

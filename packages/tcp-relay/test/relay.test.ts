import { spawn } from 'node:child_process';
import { connect, createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DaemonHandle } from '../../signal-daemon/src/index.js';
import { rpc, startDaemon } from '../../signal-daemon/test/helpers.js';
import { parseCidr } from '../src/cidr.js';
import { closeServer, echoGuest, echoServer, relay, TcpClient, tmpDir, until } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';

describe('through the relay to a real signal-daemon', () => {
  const tmp = tmpDir();
  let a: DaemonHandle;
  let b: DaemonHandle;
  let r: Awaited<ReturnType<typeof relay>>;

  beforeAll(async () => {
    a = await startDaemon(tmp.dir, A);
    b = await startDaemon(tmp.dir, B);
    r = await relay(a.tcp!);
  });
  afterAll(async () => {
    await r.close();
    await a.close();
    await b.close();
    tmp.cleanup();
  });

  it('answers version, sends, and carries receive notifications', async () => {
    expect(r.addr.host).toBe('127.0.0.2');
    const c = await TcpClient.connect(r.addr);
    expect(await c.call('version', undefined, 1)).toMatchObject({ id: 1, result: { version: expect.any(String) } });
    const sent = await c.call('send', { recipient: B, message: 'from the vm' }, 2);
    expect(sent.result.results[0].type).toBe('SUCCESS');
    await rpc(b.http!, 'send', { recipient: A, message: 'to the vm' });
    expect(await c.next()).toMatchObject({
      method: 'receive',
      params: { account: A, envelope: { sourceNumber: B, dataMessage: { message: 'to the vm' } } },
    });
    c.close();
  });

  it('refuses startLink with the request id and answers the next request on the same connection', async () => {
    const c = await TcpClient.connect(r.addr);
    c.write('{"jsonrpc":"2.0","method":"startLink","id":"evil"}\n{"jsonrpc":"2.0","method":"version","id":"next"}\n');
    const replies = [await c.next(), await c.next()];
    expect(replies).toContainEqual({
      jsonrpc: '2.0',
      error: { code: -32601, message: 'Method startLink is not available through the relay', data: null },
      id: 'evil',
    });
    expect(replies).toContainEqual({ jsonrpc: '2.0', result: { version: expect.any(String) }, id: 'next' });
    // The daemon never saw it: no link request was made.
    expect((await rpc(a.http!, 'listDevices')).result).toHaveLength(1);
    c.close();
    await until('the refusal is logged', () => r.logs.some((l) => l.msg === 'method refused'));
    await until('the connection record counts it', () =>
      r.logs.some(
        (l) => l.msg === 'connection closed' && (l.refusedMethods as Record<string, number>)?.startLink === 1,
      ),
    );
    expect(r.stats.refusedMethods.startLink).toBeGreaterThanOrEqual(1);
  });

  it('refuses a batch that contains a refused method, as one batch reply, and passes other batches', async () => {
    const c = await TcpClient.connect(r.addr);
    c.write(
      '[{"jsonrpc":"2.0","method":"version","id":1},{"jsonrpc":"2.0","method":"finishLink","params":{"deviceLinkUri":"x"},"id":2}]\n',
    );
    expect(await c.next()).toEqual([
      expect.objectContaining({ id: 1, error: expect.objectContaining({ code: -32600 }) }),
      expect.objectContaining({ id: 2, error: expect.objectContaining({ code: -32601 }) }),
    ]);
    c.write('[{"jsonrpc":"2.0","method":"version","id":3},{"jsonrpc":"2.0","method":"listGroups","id":4}]\r\n');
    expect(await c.next()).toEqual([
      { jsonrpc: '2.0', result: { version: expect.any(String) }, id: 3 },
      { jsonrpc: '2.0', result: [], id: 4 },
    ]);
    c.close();
  });

  it('answers a line over the limit itself and goes on', async () => {
    const small = await relay(a.tcp!, { maxLineBytes: 1000 });
    const c = await TcpClient.connect(small.addr);
    c.write(`{"jsonrpc":"2.0","method":"send","params":{"message":"${'x'.repeat(5000)}"},"id":1}\n`);
    c.write('{"jsonrpc":"2.0","method":"version","id":2}\n');
    const replies = [await c.next(), await c.next()];
    expect(replies).toContainEqual(
      expect.objectContaining({
        id: null,
        error: expect.objectContaining({ code: -32600, message: expect.stringContaining('1000 bytes') }),
      }),
    );
    expect(replies).toContainEqual(expect.objectContaining({ id: 2, result: expect.any(Object) }));
    c.close();
    await small.close();
  });

  it('with the filter off, passes startLink like any other bytes', async () => {
    const open = await relay(a.tcp!, { refuse: null });
    const c = await TcpClient.connect(open.addr);
    expect((await c.call('startLink', undefined, 1)).result.deviceLinkUri).toMatch(/^sgnl:/);
    c.close();
    await open.close();
  });

  it('answers 200 connections at once', async () => {
    const clients = await Promise.all(Array.from({ length: 200 }, () => TcpClient.connect(r.addr)));
    const replies = await Promise.all(clients.map((c, i) => c.call('version', undefined, i)));
    expect(replies.map((x) => x.id)).toEqual(clients.map((_, i) => i));
    expect(replies.every((x) => typeof x.result.version === 'string')).toBe(true);
    for (const c of clients) c.close();
    await until('all closed', () => r.stats.active === 0);
  });
});

describe('half-close', () => {
  for (const filter of ['on', 'off'] as const) {
    it(`a guest that sends and shuts its write side still gets every reply (filter ${filter})`, async () => {
      const { r, sock, ended, got, close } = await echoGuest(filter === 'off' ? { refuse: null } : {});
      const payload = `${'{"jsonrpc":"2.0","method":"version","id":1}\n'.repeat(2000)}{"tail":true}`;
      sock.end(payload);
      await ended; // the target's FIN came back through the relay after all the bytes
      expect(got()).toBe(payload);
      await close();
      const rec = r.logs.find((l) => l.msg === 'connection closed');
      expect(rec).toMatchObject({ bytesIn: payload.length, bytesOut: payload.length });
    });
  }
});

describe('the filter on many lines at once', () => {
  it('refuses a name inside a chunk of allowed lines and one split across two reads; the rest passes in order', async () => {
    const { sock, ended, got, close } = await echoGuest();
    const ok = (from: number, n: number) =>
      Array.from(
        { length: n },
        (_, i) => `{"jsonrpc":"2.0","method":"send","params":{"message":"m"},"id":${from + i}}\n`,
      ).join('');
    const split = '{"jsonrpc":"2.0","method":"setPin","params":{"pin":"1"},"id":"split"}\n';
    const cut = split.indexOf('setPin') + 3;
    sock.write(`${ok(0, 300)}{"jsonrpc":"2.0","method":"startLink","id":"mid"}\n${ok(300, 300)}${split.slice(0, cut)}`);
    await until('the first part went through', () => got().includes('"id":599}'));
    sock.end(`${split.slice(cut)}${ok(600, 10)}`);
    await ended;
    const lines = got()
      .split('\n')
      .filter((l) => l !== '');
    const refusals = lines.filter((l) => l.includes('"error"')).map((l) => JSON.parse(l));
    expect(refusals).toEqual([
      expect.objectContaining({ id: 'mid', error: expect.objectContaining({ code: -32601 }) }),
      expect.objectContaining({ id: 'split', error: expect.objectContaining({ code: -32601 }) }),
    ]);
    expect(lines.filter((l) => !l.includes('"error"')).join('\n')).toBe(
      `${ok(0, 300)}${ok(300, 300)}${ok(600, 10)}`.trimEnd(),
    );
    await close();
  });
});

describe('the filter on lines with escapes', () => {
  it('judges each line a lone CR ends (the daemon and signal-cli read them as separate lines)', async () => {
    const { sock, ended, got, close } = await echoGuest();
    const version = (id: string) => `{"jsonrpc":"2.0","method":"version","id":"${id}"}`;
    // A refused method after a lone CR, written plainly (through the framer) and escaped (through the scan).
    sock.write(`${version('a')}\r{"jsonrpc":"2.0","method":"startLink","id":"literal"}\n`);
    sock.write(`${version('b')}\r{"jsonrpc":"2.0","method":"start\\u004cink","id":"escaped"}\n`);
    sock.end(`${version('c')}\r${version('d')}\n`);
    await ended;
    const lines = got()
      .split(/\r\n|\r|\n/)
      .filter((l) => l !== '');
    expect(lines.filter((l) => l.includes('"error"')).map((l) => JSON.parse(l).id)).toEqual(['literal', 'escaped']);
    expect(got()).not.toContain('"method":"startLink"');
    expect(got()).not.toContain('u004cink');
    // Lines without a refused method go on, their lone CR kept, also those before a refused one.
    expect(got()).toContain(`${version('c')}\r${version('d')}\n`);
    expect(got()).toContain(`${version('a')}\r`);
    expect(got()).toContain(`${version('b')}\r`);
    await close();
  });

  it('judges each line with a \\u escape among plain ones: an escaped refused name is refused, escaped text passes, CRLF kept', async () => {
    const { r, sock, ended, got, close } = await echoGuest();
    const plain = (id: number) => `{"jsonrpc":"2.0","method":"send","params":{"message":"m"},"id":${id}}\n`;
    const quoted = '{"jsonrpc":"2.0","method":"send","params":{"message":"say \\"hi\\""},"id":"q"}\r\n';
    const hidden = '{"jsonrpc":"2.0","method":"start\\u004cink","id":"hidden"}\r\n';
    // One write: plain lines, one with escaped quotes, one with a \u escape; then one more in a later read.
    sock.write(`${plain(1)}${quoted}${plain(2)}${hidden}${plain(3)}`);
    await until('the first part went through', () => got().includes('"id":3}'));
    sock.end(`${hidden.replace('hidden', 'later')}${plain(4)}`);
    await ended;
    expect(
      got()
        .split('\n')
        .filter((l) => l.includes('"error"'))
        .map((l) => JSON.parse(l).id),
    ).toEqual(['hidden', 'later']);
    expect(
      got()
        .split('\n')
        .filter((l) => l !== '' && !l.includes('"error"'))
        .join('\n'),
    ).toBe(`${plain(1)}${quoted}${plain(2)}${plain(3)}${plain(4)}`.trimEnd());
    expect(r.logs.filter((l) => l.msg === 'method refused')).toHaveLength(2);
    await close();
  });
});

describe('a target that is down', () => {
  it('closes the guest promptly with a log line, keeps serving, and works once the target is back', async () => {
    // Find a free port, then leave it closed: the target is down.
    const probe = await echoServer();
    const target = probe.addr;
    await closeServer(probe);
    const r = await relay(target);
    try {
      const c = await TcpClient.connect(r.addr);
      await until('the guest is closed', () => c.closed, 3000);
      expect(r.logs).toContainEqual(
        expect.objectContaining({ msg: 'connection closed', reason: 'target unreachable: ECONNREFUSED' }),
      );
      const back = createServer({ allowHalfOpen: true }, (s) => s.pipe(s));
      await new Promise<void>((resolve) => back.listen(target.port, target.host, resolve));
      const c2 = await TcpClient.connect(r.addr);
      c2.write('{"echo":1}\n');
      expect(await c2.next()).toEqual({ echo: 1 });
      c2.close();
      await new Promise<void>((resolve) => back.close(() => resolve()));
    } finally {
      await r.close();
    }
  });

  it('gives up on a target that does not accept within the connect timeout', async () => {
    // A listener whose accept queue is full: further connection attempts get no answer at all.
    const holder = spawn(
      process.execPath,
      [
        '-e',
        "const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>{console.log(s.address().port);process.kill(process.pid,'SIGSTOP')})",
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    const port = Number(
      await new Promise<string>((resolve) => holder.stdout!.once('data', (d) => resolve(String(d).trim()))),
    );
    const fillers: Socket[] = [];
    try {
      for (let i = 0; i < 4; i++) fillers.push(connect(port, '127.0.0.1').on('error', () => {}));
      await new Promise((res) => setTimeout(res, 200));
      const r = await relay({ host: '127.0.0.1', port }, { connectTimeoutMs: 300 });
      const c = await TcpClient.connect(r.addr);
      await until('the guest is closed', () => c.closed, 3000);
      expect(r.logs).toContainEqual(
        expect.objectContaining({ msg: 'connection closed', reason: 'target did not accept within 300 ms' }),
      );
      await r.close();
    } finally {
      for (const f of fillers) f.destroy();
      holder.kill('SIGKILL');
    }
  });
});

describe('who may connect', () => {
  it('closes sources outside the allowlist at once and logs them', async () => {
    const echo = await echoServer();
    const r = await relay(echo.addr, { allow: [parseCidr('127.0.0.9/32')] });
    try {
      const refused = await TcpClient.connect(r.addr); // from 127.0.0.1
      await until('refused is closed', () => refused.closed, 2000);
      expect(r.logs).toContainEqual(
        expect.objectContaining({ msg: 'connection refused', reason: 'source not allowed' }),
      );
      const ok = connect({ host: r.addr.host, port: r.addr.port, localAddress: '127.0.0.9' });
      const echoed = await new Promise<string>((resolve) => {
        ok.once('data', (d) => resolve(String(d)));
        ok.write('hello\n');
      });
      expect(echoed).toBe('hello\n');
      ok.destroy();
    } finally {
      await r.close();
      await closeServer(echo);
    }
  });

  it('refuses connections over the limit and logs them', async () => {
    const echo = await echoServer();
    const r = await relay(echo.addr, { maxConnections: 2 });
    try {
      const c1 = await TcpClient.connect(r.addr);
      const c2 = await TcpClient.connect(r.addr);
      c1.write('{"a":1}\n');
      c2.write('{"a":2}\n');
      await c1.next();
      await c2.next();
      const c3 = await TcpClient.connect(r.addr);
      await until('the third is closed', () => c3.closed, 2000);
      expect(r.logs).toContainEqual(
        expect.objectContaining({ msg: 'connection refused', reason: 'connection limit', limit: 2 }),
      );
      expect(c1.closed || c2.closed).toBe(false);
      c1.close();
      c2.close();
    } finally {
      await r.close();
      await closeServer(echo);
    }
  });

  it('closes a connection idle in both directions after the idle timeout', async () => {
    const echo = await echoServer();
    const r = await relay(echo.addr, { idleTimeoutMs: 150 });
    try {
      const c = await TcpClient.connect(r.addr);
      await until('the idle guest is closed', () => c.closed, 3000);
      expect(r.logs).toContainEqual(expect.objectContaining({ msg: 'connection closed', reason: 'idle timeout' }));
    } finally {
      await r.close();
      await closeServer(echo);
    }
  });
});

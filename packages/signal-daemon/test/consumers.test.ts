/**
 * Held messages belong to consumers: each consumer has its own durable mark; a client that only
 * makes calls takes nothing away and gets no backlog; the VM consumer (through a real relay) and a
 * local SSE consumer each get every message; kill -9 loses nothing. Real processes, real clients.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { type Envelope, type HostPort, parseHostPort } from '@vigil/shared-types';
import jayson from 'jayson';
import { exited, http, rpc, SseClient, spawnDaemon, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000011';
const B = '+15550000012';
const RELAY_BIN = fileURLToPath(new URL('../../tcp-relay/bin/tcp-relay.js', import.meta.url));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Listed {
  name: string;
  connected: boolean;
  connections: number;
  held: number;
  oldestHeldAgeS: number | null;
}
const status = async (addr: HostPort) =>
  (await http(addr, { method: 'GET', path: '/api/v1/check', headers: { accept: 'application/json' } })).json() as {
    consumers: { sse: number; tcp: number; list: Listed[] };
  };
const listed = async (addr: HostPort, name: string) => (await status(addr)).consumers.list.find((c) => c.name === name);

const texts = (sse: SseClient) => sse.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message as string);
const noteText = (n: { params: { envelope?: Envelope; result?: { envelope: Envelope } } }) =>
  (n.params.result?.envelope ?? n.params.envelope)!.dataMessage!.message ?? '';

/** A real relay process in front of `target`, listening on 127.0.0.3 (it connects from its default source). */
async function spawnRelay(target: HostPort): Promise<{ child: ChildProcess; addr: HostPort }> {
  const child = spawn(
    process.execPath,
    [RELAY_BIN, '--listen', '127.0.0.3:0', '--target', `127.0.0.1:${target.port}`, '--allow', '127.0.0.0/8'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8');
  child.stderr!.on('data', (s: Buffer) => {
    out += s.toString();
  });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`relay did not start:\n${out}`)), 15_000);
    child.stdout!.on('data', (s: string) => {
      out += s;
      const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (!line) return;
      clearTimeout(t);
      resolve({ child, addr: parseHostPort((JSON.parse(line) as { listen: string }).listen) });
    });
  });
}

describe('consumers, with real processes', () => {
  const tmp = tmpDir();
  afterAll(() => tmp.cleanup());

  const daemonArgs = (dir: string, ...more: string[]) => [
    '-a',
    A,
    '--http',
    '127.0.0.1:0',
    '--tcp',
    '127.0.0.1:0',
    '--localnet',
    join(dir, 'localnet.sqlite'),
    '--data-dir',
    join(dir, 'a'),
    ...more,
  ];

  for (const stayS of [2.5, 60]) {
    it(`a tool that calls over TCP for ${stayS} s takes nothing away: the SSE consumer then gets "held-1" once`, async () => {
      const dir = join(tmp.dir, `tool-${stayS}`);
      const b = await startDaemon(dir, B);
      const a = await spawnDaemon(daemonArgs(dir));
      try {
        // 1. B sends "held-1" to A while nothing listens on A.
        expect((await rpc(b.http!, 'send', { recipient: A, message: 'held-1' })).result.results[0].type).toBe(
          'SUCCESS',
        );
        await until('held-1 is held for sse', async () => (await listed(a.http!, 'sse'))?.held === 1);
        // 2. A tool connects to :7583, calls version first (its answer is the first line), stays.
        const tool = await TcpClient.connect(a.tcp!);
        expect(await tool.call('version', undefined, 'v')).toMatchObject({
          id: 'v',
          result: { version: expect.any(String) },
        });
        if (stayS > 10) {
          await sleep(stayS * 500);
          const sent = await tool.call('send', { recipient: B, message: 'from the tool' }, 's');
          expect(sent).toMatchObject({ id: 's', result: { results: [{ type: 'SUCCESS' }] } });
          await sleep(stayS * 500);
        } else await sleep(stayS * 1000);
        expect(tool.pending).toBe(0); // no backlog came
        // 3. The consumer connects without Last-Event-ID, the tool still connected.
        const sse = await SseClient.open(a.http!);
        await sse.waitFor(1);
        await sleep(1500);
        expect(texts(sse)).toEqual(['held-1']);
        expect(await listed(a.http!, 'sse')).toMatchObject({ connected: true, held: 0 });
        expect((await status(a.http!)).consumers.list.map((c) => c.name)).toEqual(['sse']); // the tool is none
        sse.close();
        tool.close();
      } finally {
        a.child.kill('SIGTERM');
        await exited(a.child);
        await b.close();
      }
    }, 120_000);
  }

  it('the VM consumer (through a real relay) and a local SSE consumer each get all 100 messages, in order, once', async () => {
    const dir = join(tmp.dir, 'relay');
    const b = await startDaemon(dir, B);
    const a = await spawnDaemon(daemonArgs(dir));
    const relay = await spawnRelay(a.tcp!);
    const vmGot: string[] = [];
    const localGot: string[] = [];
    const send = async (from: number, to: number) => {
      for (let i = from; i <= to; i++) await rpc(b.http!, 'send', { recipient: A, message: `m${i}` });
    };
    /** The VM consumer: an on-start connection through the relay that only listens. */
    const vm = async () => {
      const c = await TcpClient.connect(relay.addr);
      void (async () => {
        for (;;) {
          const n = await c.next(600_000).catch(() => null);
          if (!n) return;
          vmGot.push(noteText(n));
        }
      })();
      return c;
    };
    const local = async () => {
      const s = await SseClient.open(a.http!);
      const seen = localGot.length;
      const timer = setInterval(() => {
        while (localGot.length - seen < s.events.length) localGot.push(texts(s)[localGot.length - seen]!);
      }, 10);
      return {
        close: () => {
          clearInterval(timer);
          s.close();
        },
        s,
      };
    };
    try {
      let vmConn = await vm();
      let sse = await local();
      await until('both are consumers', async () => (await listed(a.http!, 'relay'))?.connected === true);
      await sleep(1200); // past the probe grace
      // The VM consumer is away while 50 arrive; the local one reads them live.
      vmConn.close();
      await until('the relay consumer is away', async () => (await listed(a.http!, 'relay'))?.connected === false);
      await send(1, 50);
      await until('local has 50', () => localGot.length === 50);
      await until('50 held for relay', async () => (await listed(a.http!, 'relay'))?.held === 50);
      expect(await listed(a.http!, 'sse')).toMatchObject({ connected: true, held: 0 });
      vmConn = await vm();
      await until('vm has 50', () => vmGot.length === 50);
      await sleep(1200);
      // Now the local one is away while 50 more arrive; the VM reads them live.
      sse.close();
      await until('the sse consumer is away', async () => (await listed(a.http!, 'sse'))?.connected === false);
      await send(51, 100);
      await until('vm has 100', () => vmGot.length === 100);
      await until('50 held for sse', async () => (await listed(a.http!, 'sse'))?.held === 50);
      sse = await local();
      await until('local has 100', () => localGot.length === 100);
      await sleep(500);
      const all = Array.from({ length: 100 }, (_, i) => `m${i + 1}`);
      expect(vmGot).toEqual(all);
      expect(localGot).toEqual(all);
      sse.close();
      vmConn.close();
    } finally {
      relay.child.kill('SIGTERM');
      await exited(relay.child);
      a.child.kill('SIGTERM');
      await exited(a.child);
      await b.close();
    }
  }, 120_000);

  it('kill -9 while two consumers read: after the restart neither loses a message; duplicates only from the last quarter second', async () => {
    const dir = join(tmp.dir, 'kill');
    const b = await startDaemon(dir, B);
    const args = daemonArgs(dir, '--consumer', 'agent');
    let a = await spawnDaemon(args);
    const got: Record<string, string[]> = { sse: [], agent: [] };
    const open = async (name: string) => {
      const s = await SseClient.open(a.http!, undefined, name === 'sse' ? undefined : `consumer=${name}`);
      const seen = got[name]!.length;
      const timer = setInterval(() => {
        const t = texts(s);
        while (got[name]!.length - seen < t.length) got[name]!.push(t[got[name]!.length - seen]!);
      }, 5);
      return () => {
        clearInterval(timer);
        s.close();
      };
    };
    const N = 200;
    let sent = 0;
    // Both are consumers before anything arrives (one seen for the first time starts after what others read).
    let closers = [await open('sse'), await open('agent')];
    await until('both connected', async () => (await status(a.http!)).consumers.sse === 2);
    const sender = (async () => {
      while (sent < N) {
        await rpc(b.http!, 'send', { recipient: A, message: `k${sent + 1}` });
        sent++;
        await sleep(10);
      }
    })();
    try {
      await until('both read 60', () => got.sse!.length >= 60 && got.agent!.length >= 60);
      a.child.kill('SIGKILL');
      await exited(a.child);
      for (const c of closers) c();
      const before = { sse: got.sse!.length, agent: got.agent!.length };
      a = await spawnDaemon(args);
      closers = [await open('sse'), await open('agent')];
      await sender;
      const all = Array.from({ length: N }, (_, i) => `k${i + 1}`);
      for (const name of ['sse', 'agent']) {
        await until(`${name} has all ${N}`, () => new Set(got[name]).size === N).catch((e) => {
          throw new Error(`${e.message}: ${JSON.stringify({ before, sse: got.sse, agent: got.agent })}`);
        });
        await sleep(300);
        const list = got[name]!;
        // What came after the restart starts at most a little before where it stopped, then runs on.
        const restart = list.slice(before[name as 'sse']);
        const from = Number(restart[0]!.slice(1));
        expect(from).toBeLessThanOrEqual(before[name as 'sse'] + 1);
        expect(before[name as 'sse'] + 1 - from).toBeLessThanOrEqual(60); // the 250 ms window at ~100/s, with room
        expect(restart).toEqual(all.slice(from - 1));
        expect(list.slice(0, before[name as 'sse'])).toEqual(all.slice(0, before[name as 'sse']));
      }
      for (const c of closers) c();
    } finally {
      await sender.catch(() => {});
      a.child.kill('SIGTERM');
      await exited(a.child);
      await b.close();
    }
  }, 120_000);
});

describe('no backlog to a connection that did not ask for one', () => {
  it("jayson's TCP client gets its answers, and no backlog, from a daemon holding 10,000 messages", async () => {
    const tmp = tmpDir();
    const b = await startDaemon(tmp.dir, B);
    const a = await startDaemon(tmp.dir, A, { hold: true });
    try {
      const envelope = (i: number): Envelope => ({
        source: B,
        sourceNumber: B,
        sourceUuid: null,
        sourceName: B,
        sourceDevice: 1,
        timestamp: 1_700_000_000_000 + i,
        dataMessage: { timestamp: 1_700_000_000_000 + i, message: `h${i}` } as never,
      });
      a.inbox.append(Array.from({ length: 10_000 }, (_, i) => envelope(i + 1)));
      expect(a.inbox.held('sse')).toBe(10_000);
      const client = jayson.Client.tcp({ host: a.tcp!.host, port: a.tcp!.port });
      const call = (method: string, params: Record<string, unknown> = {}) =>
        new Promise<{ result?: unknown; error?: unknown }>((resolve, reject) =>
          client.request(method, params, (err: unknown, response: { result?: unknown; error?: unknown }) =>
            err ? reject(err) : resolve(response),
          ),
        );
      expect(await call('version')).toMatchObject({ result: { version: expect.any(String) } });
      expect(await call('send', { recipient: B, message: 'over jayson' })).toMatchObject({
        result: { results: [{ type: 'SUCCESS' }] },
      });
      // The raw equivalent: the first line after a request on a fresh connection is its answer, and nothing follows.
      const raw = await TcpClient.connect(a.tcp!);
      expect(await raw.call('listContacts', undefined, 'c')).toMatchObject({ id: 'c' });
      await sleep(500);
      expect(raw.pending).toBe(0);
      raw.close();
      // Nothing was taken away from the consumer.
      expect(a.inbox.held('sse')).toBe(10_000);
    } finally {
      await a.close();
      await b.close();
      tmp.cleanup();
    }
  }, 60_000);

  it('refuses an unknown consumer name, one too long or with control characters (400 / -32602), creating nothing', async () => {
    const tmp = tmpDir();
    const a = await startDaemon(tmp.dir, A, { hold: true, consumers: ['agent'] });
    try {
      for (const q of [
        'consumer=nobody',
        'consumer=',
        `consumer=${'x'.repeat(65)}`,
        'consumer=a%01b',
        'consumer=a%0Ab',
      ]) {
        const r = await http(a.http!, { method: 'GET', path: `/api/v1/events?${q}`, headers: {} });
        expect([q, r.status]).toEqual([q, 400]);
        expect(r.text).toMatch(/consumer/);
      }
      const tcp = await TcpClient.connect(a.tcp!);
      for (const consumer of ['nobody', 'x'.repeat(65), 'a\u0001b', 5]) {
        const reply = await tcp.call('subscribeReceive', { consumer }, 'bad');
        expect(reply).toMatchObject({ id: 'bad', error: { code: -32602 } });
      }
      // A declared name works, on both transports.
      expect(await tcp.call('subscribeReceive', { consumer: 'agent' }, 'ok')).toMatchObject({ id: 'ok', result: 0 });
      const names = (await status(a.http!)).consumers.list.map((c) => c.name).sort();
      expect(names).toEqual(['agent', 'sse']);
      expect((await status(a.http!)).consumers.sse).toBe(0);
      tcp.close();
    } finally {
      await a.close();
      tmp.cleanup();
    }
  });
});

/**
 * Held messages: what arrives while no consumer is connected is given, in order and once, to the
 * next consumer that connects without Last-Event-ID (a real EventSource client, or a TCP
 * connection), also across a kill -9 of the daemon; bounded by count; off with a switch.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import Database from 'better-sqlite3';
import { EventSource } from 'eventsource';
import { exited, http, rpc, SseClient, spawnDaemon, startDaemon, TcpClient, tmpDir, url } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A real EventSource client (the `eventsource` package), keeping the message texts it receives. */
function listen(addr: { host: string; port: number }): { es: EventSource; got: string[] } {
  const got: string[] = [];
  const es = new EventSource(`${url(addr as never)}/api/v1/events`);
  es.addEventListener('receive', (e) => got.push(JSON.parse(e.data).envelope.dataMessage.message));
  return { es, got };
}

const stored = (file: string) => () => {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db.prepare('SELECT COUNT(*) FROM inbox WHERE account = ?').pluck().get(A) as number;
  } finally {
    db.close();
  }
};

const consumers = async (addr: { host: string; port: number }) =>
  (
    (
      await http(addr as never, { method: 'GET', path: '/api/v1/check', headers: { accept: 'application/json' } })
    ).json() as { consumers: { sse: number; tcp: number } }
  ).consumers;

describe('held messages, with real processes', () => {
  const tmp = tmpDir();
  afterAll(() => tmp.cleanup());

  it('gives what arrived while nobody listened to the next EventSource and TCP consumer, in order, once, across kill -9', async () => {
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const args = ['-a', A, '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0', '--localnet', localnet];
    const b = await startDaemon(tmp.dir, B);
    let a = await spawnDaemon([...args, '--data-dir', join(tmp.dir, 'a')]);
    const send = (m: string) => rpc(b.http!, 'send', { recipient: A, message: m });
    const count = stored(join(tmp.dir, 'a', 'inbox.sqlite'));
    try {
      // A consumer that stays connected receives m1..m3 as they come.
      const first = listen(a.http!);
      await until('the stream is open', async () => (await consumers(a.http!)).sse === 1);
      for (const m of ['m1', 'm2', 'm3']) await send(m);
      await until('m1..m3 streamed', () => first.got.length === 3);
      await sleep(1200); // past the grace: it is no probe, what it was given counts as given
      first.es.close();
      await until('the stream is gone', async () => (await consumers(a.http!)).sse === 0);

      // Nobody listens: m4..m6 are stored and held. Then kill -9.
      for (const m of ['m4', 'm5', 'm6']) await send(m);
      await until('m4..m6 stored', () => count() === 6);
      a.child.kill('SIGKILL');
      await exited(a.child);

      // A new EventSource without Last-Event-ID gets m4..m6, in order, then what comes live.
      a = await spawnDaemon([...args, '--data-dir', join(tmp.dir, 'a')]);
      const second = listen(a.http!);
      await until('m4..m6 given', () => second.got.length >= 3);
      await send('m7');
      await until('m7 live', () => second.got.length >= 4);
      await sleep(1200);
      expect(second.got).toEqual(['m4', 'm5', 'm6', 'm7']);
      second.es.close();
      await until('the stream is gone', async () => (await consumers(a.http!)).sse === 0);

      // Nobody listens again; a probe that subscribes and leaves at once takes nothing away.
      for (const m of ['m8', 'm9']) await send(m);
      await until('m8, m9 stored', () => count() === 9);
      const probe = await TcpClient.connect(a.tcp!);
      expect(await probe.call('subscribeReceive', undefined, 'p')).toMatchObject({ id: 'p', result: 0 });
      probe.close();
      await until('the probe is gone', async () => (await consumers(a.http!)).tcp === 0);
      // The next TCP consumer (subscribeReceive) gets its answer, then m8 and m9, nothing before them.
      const tcp = await TcpClient.connect(a.tcp!);
      expect(await tcp.call('subscribeReceive', undefined, 's')).toMatchObject({ id: 's', result: 0 });
      const notes = [await tcp.next(), await tcp.next()];
      expect(notes.map((n) => [n.method, n.params.result.envelope.dataMessage.message])).toEqual([
        ['receive', 'm8'],
        ['receive', 'm9'],
      ]);
      expect(await tcp.call('version', undefined, 'v')).toMatchObject({ id: 'v' }); // and nothing else came first
      await sleep(1200);
      tcp.close();
      await until('the connection is gone', async () => (await consumers(a.http!)).tcp === 0);

      // Each consumer has its own mark: the tcp consumer's reads take nothing from the sse consumer,
      // which read m1..m7 itself and now gets m8 and m9, once; Last-Event-ID still replays everything.
      const third = await SseClient.open(a.http!);
      await third.waitFor(2);
      const replay = await SseClient.open(a.http!, '0');
      await replay.waitFor(9);
      await sleep(300);
      expect(third.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual(['m8', 'm9']);
      expect(replay.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual([
        'm1',
        'm2',
        'm3',
        'm4',
        'm5',
        'm6',
        'm7',
        'm8',
        'm9',
      ]);
      third.close();
      replay.close();
    } finally {
      a.child.kill('SIGTERM');
      await exited(a.child);
      await b.close();
    }
  }, 60_000);
});

describe('held messages, bounds and switch', () => {
  it('gives at most --hold-messages of the newest; none with --hold off (the stream starts at the present)', async () => {
    const tmp = tmpDir();
    const b = await startDaemon(tmp.dir, B);
    const bounded = await startDaemon(tmp.dir, A, { hold: true, holdMessages: 2 });
    try {
      for (const m of ['h1', 'h2', 'h3']) await rpc(b.http!, 'send', { recipient: A, message: m });
      await until('stored', () => bounded.inbox.head === 3);
      expect(bounded.inbox.held('sse')).toBe(2);
      const sse = await SseClient.open(bounded.http!);
      await sse.waitFor(2);
      await sleep(200);
      expect(sse.events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual(['h2', 'h3']);
      sse.close();
      await bounded.close();

      const off = await startDaemon(tmp.dir, A, { hold: false });
      try {
        await rpc(b.http!, 'send', { recipient: A, message: 'h4' });
        await until('stored', () => off.inbox.head === 4);
        expect(off.inbox.held('sse')).toBe(0);
        const s2 = await SseClient.open(off.http!);
        await sleep(300);
        expect(s2.events).toEqual([]);
        s2.close();
      } finally {
        await off.close();
      }
    } finally {
      await bounded.close();
      await b.close();
      tmp.cleanup();
    }
  });
});

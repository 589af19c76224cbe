/**
 * What a local client (or a VM guest through the relay) can make the daemon do: attachment
 * paths, file modes, connection slots. Every test runs the daemon as a real process.
 */
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { HostPort } from '@vigil/shared-types';
import Database from 'better-sqlite3';
import { until } from '../../../test/support.js';
import { openDatabase } from '../src/sqlite.js';
import { http, rpc, SseClient, spawnDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';

const children: ChildProcess[] = [];
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const f of cleanups.splice(0)) f();
});

async function daemon(args: string[], env: NodeJS.ProcessEnv = {}, umask?: string) {
  const d = await spawnDaemon(['--http', ':0', '--tcp', ':0', ...args], env, umask);
  children.push(d.child);
  return d;
}

function dir(): string {
  const t = tmpDir();
  cleanups.push(t.cleanup);
  return t.dir;
}

/** A daemon of account A on a local network of its own. */
function localDaemon(...extra: string[]) {
  const d0 = dir();
  return daemon(['-a', A, '--localnet', join(d0, 'n'), '--data-dir', join(d0, 'a'), ...extra]);
}

/** The promise's value, or a failure naming what did not answer in time (a frozen daemon). */
function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}

const countRows = (file: string, table: string): number => {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  } finally {
    db.close();
  }
};

const logLines = (out: string, msg: string) =>
  out.split('\n').filter((l) => l.startsWith('{') && (JSON.parse(l) as { msg: string }).msg === msg);

describe('attachments given as file paths', () => {
  it('refuses special files, directories and oversize files with -32602, stores nothing, and stays responsive', async () => {
    const d0 = dir();
    const localnet = join(d0, 'n.sqlite');
    const b = await daemon(['-a', B, '--localnet', localnet, '--data-dir', join(d0, 'b')]);
    const a = await daemon(['-a', A, '--localnet', localnet, '--data-dir', join(d0, 'a')]);
    const fifo = join(d0, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const sparse = join(d0, 'sparse.bin');
    writeFileSync(sparse, '');
    truncateSync(sparse, 2 * 1024 ** 3);
    const send = (path: string) => rpc(a.http!, 'send', { recipient: B, message: 'x', attachments: [path] });

    // A FIFO nobody writes to: the send is refused and a call beside it answers at once.
    const tcp = await TcpClient.connect(a.tcp!);
    tcp.write(
      `${JSON.stringify({ jsonrpc: '2.0', method: 'send', params: { recipient: B, attachment: fifo }, id: 1 })}\n`,
    );
    const version = await within(2000, 'version beside a FIFO send', rpc(a.http!, 'version'));
    expect(version.result.version).toEqual(expect.any(String));
    const fifoReply = await within(2000, 'send of a FIFO', tcp.next());
    expect(fifoReply.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining(`${fifo} is not a regular file (a FIFO)`),
    });
    tcp.close();

    const zero = await within(2000, 'send of /dev/zero', send('/dev/zero'));
    expect(zero.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('/dev/zero is not a regular file (a character device)'),
    });
    const directory = await send(d0);
    expect(directory.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('is not a regular file (a directory)'),
    });
    const big = await within(2000, 'send of a 2 GB file', send(sparse));
    expect(big.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('is larger than the limit of 8388608 bytes'),
    });
    const missing = await send(join(d0, 'nothing-here'));
    expect(missing.error).toMatchObject({ code: -32602, message: expect.stringContaining('does not exist') });
    // One refused attachment among good ones stores none of them.
    const good = join(d0, 'good.txt');
    writeFileSync(good, 'good');
    const mixed = await send(good).then(() => rpc(a.http!, 'send', { recipient: B, attachments: [good, '/dev/zero'] }));
    expect(mixed.error.code).toBe(-32602);
    expect(countRows(localnet, 'attachments')).toBe(1); // the one good send before it
    // The daemon's memory stayed small (/dev/zero was never read).
    const rss = Number(
      execFileSync('ps', ['-o', 'rss=', '-p', String(a.child.pid)])
        .toString()
        .trim(),
    );
    expect(rss).toBeLessThan(400 * 1024);
    expect(b.child.exitCode).toBeNull();
  });

  it('with --attachment-dir, takes files inside it and refuses a symlink pointing out (to /etc/passwd)', async () => {
    const d0 = dir();
    const localnet = join(d0, 'n.sqlite');
    const allowed = join(d0, 'outbox');
    mkdirSync(allowed);
    writeFileSync(join(allowed, 'photo.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0x00, 0x01]));
    symlinkSync('/etc/passwd', join(allowed, 'passwd'));
    await daemon(['-a', B, '--localnet', localnet, '--data-dir', join(d0, 'b')]);
    const a = await daemon(['-a', A, '--localnet', localnet, '--data-dir', join(d0, 'a'), '--attachment-dir', allowed]);
    const sse = await SseClient.open(
      (await daemon(['-a', '+15550000003', '--localnet', localnet, '--data-dir', join(d0, 'c')])).http!,
    );
    cleanups.push(() => sse.close());

    const out = await rpc(a.http!, 'send', { recipient: B, attachments: [join(allowed, 'passwd')] });
    expect(out.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('is outside the allowed directories'),
    });
    const elsewhere = await rpc(a.http!, 'send', { recipient: B, attachments: ['/etc/hostname'] });
    expect(elsewhere.error.message).toContain('is outside the allowed directories');
    expect(countRows(localnet, 'attachments')).toBe(0);

    const ok = await rpc(a.http!, 'send', {
      recipient: '+15550000003',
      attachments: [join(allowed, 'photo.jpg'), 'data:text/plain;filename=a.txt;base64,aGk='],
    });
    expect(ok.result.results[0].type).toBe('SUCCESS');
    const [ev] = await sse.waitFor(1);
    const atts = JSON.parse(ev!.data).envelope.dataMessage.attachments;
    expect(atts.map((x: { filename: string; size: number }) => [x.filename, x.size])).toEqual([
      ['photo.jpg', 5],
      ['a.txt', 2],
    ]);
  });

  it('refuses a missing --attachment-dir at start with exit 78', async () => {
    const d0 = dir();
    await expect(daemon(['-a', A, '--localnet', join(d0, 'n'), '--attachment-dir', join(d0, 'nope')])).rejects.toThrow(
      /exited with 78[\s\S]*invalid --attachment-dir/,
    );
  });
});

describe('attachment paths with the signal-cli backend', () => {
  it('are checked before signal-cli reads them; its inbox is 0600 under umask 022', async () => {
    const d0 = dir();
    const fake = fileURLToPath(new URL('./fixtures/fake-signal-cli.mjs', import.meta.url));
    chmodSync(fake, 0o755);
    const dataDir = join(d0, 'a');
    const a = await daemon(
      [
        '-a',
        A,
        '--backend',
        'signal-cli',
        '--signal-cli',
        fake,
        '--signal-cli-config',
        join(d0, 'sc'),
        '--data-dir',
        dataDir,
      ],
      {},
      '022',
    );
    const check = () => http(a.http!, { method: 'GET', path: '/api/v1/check', headers: {} });
    await until('signal-cli serves', async () => (await check()).status === 200);
    const zero = await within(
      2000,
      'send of /dev/zero',
      rpc(a.http!, 'send', { recipient: B, attachments: ['/dev/zero'] }),
    );
    expect(zero.error).toMatchObject({
      code: -32602,
      message: expect.stringContaining('/dev/zero is not a regular file'),
    });
    // Every file parameter signal-cli reads, in any spelling: a quote attachment's preview file,
    // a sticker pack's path, an avatar; none of them reaches signal-cli.
    const refused: [string, Record<string, unknown>][] = [
      ['send', { recipient: B, message: 'q', 'quote-timestamp': 1, quoteAttachment: ['image/png:x.png:/dev/zero'] }],
      ['send', { recipient: B, message: 'p', previewUrl: 'https://x', 'preview-image': '/dev/zero' }],
      ['uploadStickerPack', { path: '/dev/zero' }],
      ['updateProfile', { avatar: '/dev/zero' }],
    ];
    for (const [method, params] of refused) {
      expect((await rpc(a.http!, method, params)).error).toMatchObject({
        code: -32602,
        message: expect.stringContaining('/dev/zero is not a regular file'),
      });
    }
    const seen = (await rpc(a.http!, '_requests', {})).result as { method: string; params: unknown }[];
    expect(JSON.stringify(seen)).not.toContain('/dev/zero');
    const good = join(d0, 'good.txt');
    writeFileSync(good, 'good');
    const ok = await rpc(a.http!, 'send', { recipient: B, attachments: [good] });
    expect(ok.result.results[0].type).toBe('SUCCESS');
    // A data: URI is no path: a quote attachment's data: preview goes through as it came.
    const quoted = { recipient: B, message: 'q', quoteAttachment: 'image/png:x.png:data:image/png;base64,AA==' };
    expect((await rpc(a.http!, 'send', quoted)).result.results[0].type).toBe('SUCCESS');
    expect((statSync(join(dataDir, 'inbox.sqlite')).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(join(dataDir, 'inbox.sqlite-wal')).mode & 0o777).toString(8)).toBe('600');
    expect((statSync(dataDir).mode & 0o777).toString(8)).toBe('700');
  });
});

describe('file modes', () => {
  /** Every file and directory under `root` with its mode. */
  function modes(root: string): [string, string][] {
    const out: [string, string][] = [];
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        const st = statSync(p);
        out.push([p.slice(root.length), (st.mode & 0o777).toString(8)]);
        if (st.isDirectory()) walk(p);
      }
    };
    walk(root);
    return out;
  }

  it('keeps every file 0600 and every directory 0700 under umask 022, also in a data home created 0755', async () => {
    const home = join(dir(), 'xdg');
    mkdirSync(join(home, 'vigil'), { recursive: true });
    chmodSync(join(home, 'vigil'), 0o755); // as another tool may have created it
    const env = { XDG_DATA_HOME: home };
    const b = await daemon(['-a', B, '--log-file', join(home, 'vigil', 'logs', 'b.log')], env, '022');
    const a = await daemon(['-a', A, '--log-file', join(home, 'vigil', 'logs', 'a.log')], env, '022');
    const sse = await SseClient.open(b.http!);
    cleanups.push(() => sse.close());
    const sent = await rpc(a.http!, 'send', {
      recipient: B,
      message: 'hi',
      attachments: ['data:text/plain;base64,aGk='],
    });
    expect(sent.result.results[0].type).toBe('SUCCESS');
    await sse.waitFor(1);
    const all = modes(home);
    expect(all.map(([p]) => p)).toEqual(
      expect.arrayContaining([
        '/vigil/localnet.sqlite',
        '/vigil/localnet.sqlite-wal',
        '/vigil/localnet.sqlite-shm',
        `/vigil/signal-daemon/${B}/attachments`,
        '/vigil/logs/a.log',
      ]),
    );
    expect(all.filter(([p]) => p.includes('/attachments/')).length).toBe(1);
    const wrong = all.filter(([p, mode]) => mode !== (statSync(home + p).isDirectory() ? '700' : '600'));
    expect(wrong).toEqual([]);
  });

  it('tightens a database and its -wal and -shm left 0644 by an older version', () => {
    const d0 = dir();
    const file = join(d0, 'old.sqlite');
    for (const f of [file, `${file}-wal`]) {
      writeFileSync(f, '');
      chmodSync(f, 0o644);
    }
    const db = openDatabase(file);
    db.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    try {
      for (const f of [file, `${file}-wal`, `${file}-shm`]) expect((statSync(f).mode & 0o777).toString(8)).toBe('600');
    } finally {
      db.close();
    }
  });
});

describe('TCP connection slots', () => {
  /** A connection from `localAddress`; resolves once connected, with whether the daemon closed it. */
  function open(addr: HostPort, localAddress: string): Promise<{ socket: Socket; closed: () => boolean }> {
    return new Promise((resolve, reject) => {
      let closed = false;
      const socket = connect({ host: addr.host, port: addr.port, localAddress }, () =>
        resolve({ socket, closed: () => closed }),
      );
      socket.on('close', () => {
        closed = true;
      });
      socket.once('error', reject);
      cleanups.push(() => socket.destroy());
    });
  }

  it('idle sockets from one source cannot lock other clients out (by default half the slots); refusals are logged once per episode', async () => {
    const a = await localDaemon('--max-connections', '16');
    const flood: { socket: Socket; closed: () => boolean }[] = [];
    for (let i = 0; i < 16; i++) flood.push(await open(a.tcp!, '127.0.0.3'));
    await until('the over-cap connections are closed', () => flood.filter((c) => c.closed()).length === 8, 5000);
    expect(flood.slice(0, 8).every((c) => !c.closed())).toBe(true);

    // Another client still gets in and is answered.
    const client = await TcpClient.connect(a.tcp!);
    expect((await within(2000, 'version from 127.0.0.1', client.call('version'))).result.version).toEqual(
      expect.any(String),
    );
    client.close();
    expect(logLines(a.output(), 'tcp connections refused: too many connections from one source')).toHaveLength(1);

    for (const c of flood) c.socket.destroy();
    await until('the episode ends', () => logLines(a.output(), 'tcp connections accepted again').length === 1, 5000);
    expect(JSON.parse(logLines(a.output(), 'tcp connections accepted again')[0]!)).toMatchObject({
      remote: '127.0.0.3',
      refused: 8,
    });
    // The source gets in again.
    const again = await open(a.tcp!, '127.0.0.3');
    again.socket.write('{"jsonrpc":"2.0","method":"version","id":1}\n');
    await new Promise((r) => again.socket.once('data', r));
  });

  it('keeps a connection open while it keeps sending, however long, and closes it once it stops', async () => {
    const a = await localDaemon('--receive-mode', 'manual', '--tcp-idle-timeout', '0.6', '--log-level', 'debug');
    const c = await TcpClient.connect(a.tcp!);
    // A call every 0.25 s for 2 s: more than three timeouts in all, never one of silence.
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 250));
      expect(c.closed).toBe(false);
      expect((await c.call('version')).result).toBeDefined();
    }
    const quietFrom = Date.now();
    await until('the quiet connection is closed', () => c.closed, 5000);
    // Closed after the timeout of silence (timers may fire a little early), not long after it.
    expect(Date.now() - quietFrom).toBeGreaterThanOrEqual(550);
    expect(Date.now() - quietFrom).toBeLessThan(2000);
    expect(logLines(a.output(), 'tcp connection closed: idle')).toHaveLength(1);
  });

  it('closes idle connections that receive nothing; a subscribed consumer stays however quiet', async () => {
    const a = await localDaemon('--receive-mode', 'manual', '--tcp-idle-timeout', '0.5', '--log-level', 'debug');
    const idle = await open(a.tcp!, '127.0.0.1');
    const done = await TcpClient.connect(a.tcp!);
    expect((await done.call('version')).result).toBeDefined();
    const consumer = await TcpClient.connect(a.tcp!);
    const sub = await consumer.call('subscribeReceive');
    expect(sub.result).toEqual(expect.any(Number));
    await until('the idle connections are closed', () => idle.closed() && done.closed, 5000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(consumer.closed).toBe(false);
    // Still a consumer: a message to A arrives on it.
    const sent = await rpc(a.http!, 'send', { noteToSelf: true, message: 'still here' });
    expect(sent.result).toBeDefined();
    const note = await consumer.next();
    expect(note).toMatchObject({ method: 'receive', params: { subscription: sub.result } });
    // After unsubscribing it is an idle connection like any other.
    expect((await consumer.call('unsubscribeReceive', { subscription: sub.result })).result).toEqual({});
    await until('the unsubscribed connection is closed', () => consumer.closed, 5000);
    expect(logLines(a.output(), 'tcp connection closed: idle').length).toBe(3);
  });
});

describe('bad params are -32602, not internal errors', () => {
  it('answers a deep nesting in recipient, a bad percent-encoding and a directory with -32602, logging no error', async () => {
    const a = await localDaemon();
    const d0 = dir();
    const deep = `${'['.repeat(50_000)}"+15550000002"${']'.repeat(50_000)}`;
    const body = `{"jsonrpc":"2.0","method":"send","params":{"recipient":${deep},"message":"x"},"id":1}`;
    const nested = (await http(a.http!, { body })).json() as { error: { code: number; message: string } };
    expect(nested.error.code).toBe(-32602);
    const bad = await rpc(a.http!, 'send', { noteToSelf: true, attachments: ['data:text/plain,%E0%A4%A'] });
    expect(bad.error).toMatchObject({ code: -32602, message: expect.stringContaining('percent-encoded') });
    const directory = await rpc(a.http!, 'send', { noteToSelf: true, attachments: [d0] });
    expect(directory.error.code).toBe(-32602);
    expect(a.output()).not.toContain('"level":"error"');
  });
});

import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { HostPort } from '@vigil/shared-types';
import type { DaemonHandle } from '../src/index.js';
import type { SignalCliBackend } from '../src/signalcli/backend.js';
import { exited, http, rpc, SseClient, spawnDaemon, startDaemon, TcpClient, tmpDir } from './helpers.js';

const FAKE = fileURLToPath(new URL('./fixtures/fake-signal-cli.mjs', import.meta.url));
chmodSync(FAKE, 0o755);
const A = '+15550000001';

type Daemon = DaemonHandle & { logs: Record<string, unknown>[] };

/** A daemon on the signal-cli backend, running the stand-in, with short supervision timings. */
function startSignalCli(
  dir: string,
  extra: Record<string, unknown> = {},
  signalCli: Record<string, unknown> = {},
): Promise<Daemon> {
  return startDaemon(dir, A, {
    backend: 'signal-cli',
    signalCli: {
      program: FAKE,
      configDir: join(dir, 'signal-cli'),
      callTimeoutMs: 5000,
      pingIntervalMs: 200,
      pingTimeoutMs: 500,
      startTimeoutMs: 3000,
      restartInitialMs: 100,
      restartMaxMs: 400,
      stopTimeoutMs: 1000,
      ...signalCli,
    },
    ...extra,
  });
}

const backendOf = (d: DaemonHandle) => d.backend as SignalCliBackend;

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const checkStatus = async (d: { http: HostPort | null }) =>
  (await http(d.http!, { method: 'GET', path: '/api/v1/check', headers: {} })).status;
const envelope = (n: number) => ({
  source: '+15550000009',
  sourceNumber: '+15550000009',
  sourceUuid: 'uuid-9',
  sourceName: 'Nine',
  sourceDevice: 1,
  timestamp: 1700000000000 + n,
  dataMessage: { timestamp: 1700000000000 + n, message: `incoming ${n}`, expiresInSeconds: 0, viewOnce: false },
});

/** What the fake signal-cli received, without the daemon's own liveness pings (`version`, on a timer). */
const forwarded = (requests: unknown) =>
  (requests as { method: string; params: unknown }[]).filter((r) => r.method !== 'version');

describe('signal-cli backend', () => {
  const tmp = tmpDir();
  let d: Daemon;

  beforeAll(async () => {
    d = await startSignalCli(tmp.dir);
    await until('signal-cli serves', () => d.backend.state() === 'serving');
  });
  afterAll(async () => {
    await d.close();
    tmp.cleanup();
  });

  it('runs signal-cli -a ACCOUNT --config DIR [args] jsonRpc', async () => {
    const t = tmpDir();
    const argsFile = join(t.dir, 'args.json');
    const e = await startSignalCli(
      t.dir,
      {},
      { extraArgs: ['--trust-new-identities', 'always', `--fake-args-file=${argsFile}`] },
    );
    try {
      await until('serving', () => e.backend.state() === 'serving');
      expect(JSON.parse(readFileSync(argsFile, 'utf8'))).toEqual([
        '-a',
        A,
        '--config',
        join(t.dir, 'signal-cli'),
        '--trust-new-identities',
        'always',
        `--fake-args-file=${argsFile}`,
        'jsonRpc',
      ]);
    } finally {
      await e.close();
      t.cleanup();
    }
  });

  it('forwards calls and returns results and errors unchanged', async () => {
    expect((await rpc(d.http!, 'send', { recipient: ['+15550000002'], message: 'x' })).result).toEqual({
      timestamp: 1700000000000,
      results: [{ recipientAddress: { uuid: 'uuid-+15550000002', number: '+15550000002' }, type: 'SUCCESS' }],
    });
    expect(d.logs).toContainEqual(expect.objectContaining({ msg: 'send succeeded', method: 'send', delivered: 1 }));
    expect((await rpc(d.http!, 'send', { recipient: ['+15559999999'], message: 'x' })).error).toEqual({
      code: -1,
      message: 'Failed to send message',
      data: {
        response: {
          timestamp: 1700000000000,
          results: [{ recipientAddress: { uuid: null, number: '+15559999999' }, type: 'UNREGISTERED_FAILURE' }],
        },
      },
    });
    expect((await rpc(d.http!, 'updateProfile', {})).error).toEqual({
      code: -32601,
      message: 'Method not implemented',
      data: null,
    });
    // The daemon answers version itself.
    expect((await rpc(d.http!, 'version')).result.version).not.toBe('0.13.19');
  });

  it('forwards params verbatim: signal-cli resolves dashed and plural names itself', async () => {
    const params = {
      recipients: ['+15550000002'],
      'group-ids': ['Zw=='],
      'text-style': ['0:1:BOLD'],
      'note-to-self': 'as it came',
      account: A,
      message: 'x',
    };
    await rpc(d.http!, 'send', params);
    await rpc(d.http!, 'updateGroup', { 'group-id': 'Zw==', member: '+15550000003', bans: 7 });
    const seen = forwarded((await rpc(d.http!, '_requests')).result);
    expect(seen.slice(-2)).toEqual([
      { method: 'send', params },
      { method: 'updateGroup', params: { 'group-id': 'Zw==', member: '+15550000003', bans: 7 } },
    ]);
  });

  it('forwards signal-cli 0.14 methods verbatim; /api/v1/check names the version signal-cli reported', async () => {
    const params = { 'group-id': ['Zw=='], question: 'q', options: ['a', 'b'], 'no-multi': true };
    await rpc(d.http!, 'sendPollCreate', params);
    await rpc(d.http!, 'uploadStickerPack', { path: 'data:application/json,{}' });
    await rpc(d.http!, 'subscribeCallEvents');
    const seen = forwarded((await rpc(d.http!, '_requests')).result);
    expect(seen.slice(-3)).toEqual([
      { method: 'sendPollCreate', params },
      { method: 'uploadStickerPack', params: { path: 'data:application/json,{}' } },
      { method: 'subscribeCallEvents' },
    ]);
    const status = await http(d.http!, {
      method: 'GET',
      path: '/api/v1/check',
      headers: { accept: 'application/json' },
    });
    expect(status.json()).toMatchObject({ signalCliInterface: '0.13.19', backend: { kind: 'signal-cli' } });
  });

  it('keeps replies apart for 50 concurrent clients that all use the same ids', async () => {
    const clients = await Promise.all(Array.from({ length: 50 }, () => TcpClient.connect(d.tcp!)));
    const replies = await Promise.all(clients.map((c, i) => c.call('echo', { client: i, delayMs: (i * 37) % 50 }, 1)));
    replies.forEach((r, i) => {
      expect(r).toEqual({ jsonrpc: '2.0', result: { client: i, delayMs: (i * 37) % 50 }, id: 1 });
    });
    for (const c of clients) c.close();
  });

  it('forwards each element of a batch and answers the batch as one', async () => {
    const r = await http(d.http!, {
      body: JSON.stringify([
        { jsonrpc: '2.0', method: 'echo', params: { n: 1, delayMs: 30 }, id: 'a' },
        { jsonrpc: '2.0', method: 'listGroups', id: 'b' },
        { jsonrpc: '2.0', method: 'nope', id: 'c' },
      ]),
    });
    expect(r.json()).toEqual([
      { jsonrpc: '2.0', result: { n: 1, delayMs: 30 }, id: 'a' },
      { jsonrpc: '2.0', result: [], id: 'b' },
      { jsonrpc: '2.0', error: { code: -32601, message: 'Method not implemented', data: null }, id: 'c' },
    ]);
  });

  it('stores receive notifications in the inbox and streams them with ids', async () => {
    const sse = await SseClient.open(d.http!);
    const tcp = await TcpClient.connect(d.tcp!);
    await tcp.call('version');
    await rpc(d.http!, '_inject', { envelopes: [envelope(1), envelope(2)] });
    const events = await sse.waitFor(2);
    expect(events.map((e) => JSON.parse(e.data))).toEqual([
      { envelope: envelope(1), account: A },
      { envelope: envelope(2), account: A },
    ]);
    expect(events.map((e) => e.id)).toEqual([d.inbox.eventId(d.inbox.head - 1), d.inbox.eventId(d.inbox.head)]);
    expect(await tcp.next()).toEqual({
      jsonrpc: '2.0',
      method: 'receive',
      params: { envelope: envelope(1), account: A },
    });
    sse.close();
    tcp.close();
  });

  it('serves receive from the inbox that signal-cli fills (not forwarded: its child receives continuously)', async () => {
    // The poller's first receive gets what no consumer has kept (the stream above was a probe).
    const first = await rpc(d.http!, 'receive', { timeout: 0 });
    expect(first.result).toEqual([
      { envelope: envelope(1), account: A },
      { envelope: envelope(2), account: A },
    ]);
    const waiting = rpc(d.http!, 'receive', { timeout: 60, 'max-messages': 1 });
    await rpc(d.http!, '_inject', { envelopes: [envelope(3), envelope(4)] });
    expect((await waiting).result).toEqual([{ envelope: envelope(3), account: A }]);
    expect((await rpc(d.http!, 'receive', { timeout: 0 })).result).toEqual([{ envelope: envelope(4), account: A }]);
  });

  it('ignores garbage on the child stdout and keeps answering', async () => {
    await rpc(d.http!, '_garbage');
    expect((await rpc(d.http!, 'listGroups')).result).toEqual([]);
    expect(d.logs).toContainEqual(expect.objectContaining({ level: 'warn', snippet: 'this is not json' }));
  });

  it('fails a call that gets no answer within the call timeout with -3', async () => {
    const t = tmpDir();
    const e = await startSignalCli(t.dir, {}, { callTimeoutMs: 200 });
    try {
      await until('serving', () => e.backend.state() === 'serving');
      const r = await rpc(e.http!, 'echo', { delayMs: 3000 });
      expect(r.error).toMatchObject({ code: -3, message: 'signal-cli did not answer echo within 0.2 s' });
    } finally {
      await e.close();
      t.cleanup();
    }
  });

  it('fails pending calls at once when the child dies, answers 503 while down, and restarts it', async () => {
    const before = backendOf(d).starts;
    const pid = backendOf(d).pid!;
    const slow = rpc(d.http!, 'echo', { delayMs: 20_000 }, 'slow');
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    // The crash call itself gets no reply: the child exits first.
    const crash = rpc(d.http!, '_crash', { code: 3, stderr: 'fatal: database locked' }, 'crash');
    const failed = await slow;
    expect(failed.error).toMatchObject({ code: -3, message: expect.stringContaining('signal-cli exited (code 3)') });
    expect(Date.now() - t0).toBeLessThan(2000);
    expect((await crash).error.code).toBe(-3);
    // While it is down: 503, calls fail at once, the daemon's own methods answer.
    await until('check answers 503', async () => (await checkStatus(d)) === 503);
    expect((await rpc(d.http!, 'version')).result).toBeDefined();
    await until('serving again', async () => (await checkStatus(d)) === 200);
    expect(backendOf(d).starts).toBe(before + 1);
    expect(backendOf(d).pid).not.toBe(pid);
    expect(() => process.kill(pid, 0)).toThrow(); // the old child is gone (and reaped)
    expect(d.logs).toContainEqual(
      expect.objectContaining({ msg: 'signal-cli exited; restarting', code: 3, stderr: ['fatal: database locked'] }),
    );
    expect((await rpc(d.http!, 'listGroups')).result).toEqual([]);
  });

  it('kills and restarts a child that stops answering', async () => {
    const before = backendOf(d).starts;
    const pid = backendOf(d).pid!;
    await http(d.http!, { body: '{"jsonrpc":"2.0","method":"_hang"}' }); // a notification: no reply
    await until('restarted', () => backendOf(d).starts > before && d.backend.state() === 'serving');
    expect(d.logs).toContainEqual(
      expect.objectContaining({ msg: 'signal-cli stopped answering: killing it to restart', pid }),
    );
    expect((await rpc(d.http!, 'listGroups')).result).toEqual([]);
  });
});

describe('signal-cli backend, start-up problems', () => {
  it('says once, clearly, that the program is missing; calls fail at once; check is 503', async () => {
    const tmp = tmpDir();
    const d = await startSignalCli(tmp.dir, {}, { program: join(tmp.dir, 'no-such-signal-cli') });
    try {
      await until('four restarts', () => backendOf(d).starts >= 5, 5000);
      // Exponential backoff, capped.
      const delays = d.logs.filter((l) => l.msg === 'signal-cli exited; restarting').map((l) => l.restartInMs);
      expect(delays.slice(0, 4)).toEqual([100, 200, 400, 400]);
      const lines = d.logs.filter((l) => String(l.msg).startsWith('signal-cli cannot be run: not found'));
      expect(lines).toHaveLength(1);
      expect(await checkStatus(d)).toBe(503);
      const t0 = Date.now();
      expect((await rpc(d.http!, 'listGroups')).error.code).toBe(-3);
      expect(Date.now() - t0).toBeLessThan(500);
    } finally {
      await d.close();
      tmp.cleanup();
    }
  });

  it('says that Java is too old when signal-cli fails that way', async () => {
    const tmp = tmpDir();
    const d = await startSignalCli(tmp.dir, {}, { extraArgs: ['--fake-startup=java-too-old'] });
    try {
      await until('the problem is logged', () => d.logs.some((l) => String(l.msg).includes('needs Java 21')));
      expect(d.backend.state()).not.toBe('serving');
    } finally {
      await d.close();
      tmp.cleanup();
    }
  });
});

describe('signal-cli backend, daemon restarts and shutdown', () => {
  it('replays notifications after a daemon restart, and leaves no child behind', async () => {
    const tmp = tmpDir();
    const args = [
      '--account',
      A,
      '--backend',
      'signal-cli',
      '--signal-cli',
      FAKE,
      '--http',
      ':0',
      '--tcp',
      'off',
      '--data-dir',
      join(tmp.dir, 'data'),
    ];
    let p = await spawnDaemon(args);
    try {
      await until('serving', async () => (await checkStatus(p)) === 200);
      const sse = await SseClient.open(p.http!);
      await rpc(p.http!, '_inject', { envelopes: [envelope(7), envelope(8)] });
      await sse.waitFor(2);
      sse.close();
      const childPid = Number(/"msg":"signal-cli serving"[^\n]*"pid":(\d+)/.exec(p.output())?.[1]);
      expect(childPid).toBeGreaterThan(0);
      p.child.kill('SIGTERM');
      expect(await exited(p.child)).toEqual({ code: 0, signal: null });
      expect(() => process.kill(childPid, 0)).toThrow();

      p = await spawnDaemon(args);
      const replay = await SseClient.open(p.http!, '0');
      const events = await replay.waitFor(2);
      expect(events.map((e) => JSON.parse(e.data).envelope.dataMessage.message)).toEqual(['incoming 7', 'incoming 8']);
      replay.close();
    } finally {
      p.child.kill('SIGKILL');
      tmp.cleanup();
    }
  }, 30_000);
});

describe('signal-cli backend, arguments from the environment', () => {
  it('splits SIGNAL_DAEMON_SIGNAL_CLI_ARG on commas and white space, one argument each', async () => {
    const tmp = tmpDir();
    const argsFile = join(tmp.dir, 'args.json');
    const p = await spawnDaemon(
      ['--account', A, '--backend', 'signal-cli', '--signal-cli', FAKE, '--http', ':0', '--tcp', 'off'],
      {
        SIGNAL_DAEMON_DATA_DIR: join(tmp.dir, 'data'),
        SIGNAL_DAEMON_SIGNAL_CLI_ARG: `--trust-new-identities always, --fake-args-file=${argsFile}`,
      },
    );
    try {
      await until('serving', async () => (await checkStatus(p)) === 200);
      const args = JSON.parse(readFileSync(argsFile, 'utf8')) as string[];
      expect(args.slice(-4)).toEqual(['--trust-new-identities', 'always', `--fake-args-file=${argsFile}`, 'jsonRpc']);
      p.child.kill('SIGTERM');
      expect(await exited(p.child)).toEqual({ code: 0, signal: null });
    } finally {
      p.child.kill('SIGKILL');
      tmp.cleanup();
    }
  }, 30_000);
});

/**
 * One shutdown, three services (shared-types src/node/lifecycle.ts): the messaging daemon, the
 * inference server and the relay, each as its real binary. For each alike: `listening` is logged
 * once; a call under way when SIGTERM comes is answered before its connection is closed; the log
 * says listening, stopping, stopped in that order; the exit code is 0. And a listen conflict on a
 * listener opened after others (or after a file) unwinds what was opened, so that the process
 * ends by itself with exit 1 and the ListenError's one line on stderr.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server, Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { makeTiny, SseCompletion, tmpDir } from '../packages/inference-server/test/helpers.js';
import { ExitCode, parseHostPort } from '../packages/shared-types/src/index.js';
import { exited, freePort, until } from './support.js';

const bin = (pkg: string) => fileURLToPath(new URL(`../packages/${pkg}/bin/${pkg}.js`, import.meta.url));
const tmp = tmpDir('vigil-lifecycle-');
const MODEL = join(tmp.dir, 'tiny.gguf');
beforeAll(() => makeTiny(MODEL), 60_000);
afterAll(() => tmp.cleanup());

interface Run {
  child: ChildProcess;
  /** What it wrote on stderr so far. */
  err: () => string;
  /** The JSON log lines so far. */
  log: () => Record<string, unknown>[];
}

function run(argv: string[]): Run {
  const child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (s: string) => {
    out += s;
  });
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    err += s;
  });
  const log = () =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { child, err: () => err, log };
}

/** A client with a call under way when the stop begins. */
interface InFlight {
  /** Resolves with what the client saw, in order: each reply, then the connection's end. */
  done: Promise<string[]>;
}

/** A line-protocol client on a TCP socket: sends one line; records the reply line and the end. */
function lineCall(port: number, host: string, line: string): { sent: Promise<void>; done: Promise<string[]> } {
  const seen: string[] = [];
  const sock = new Socket();
  let buf = '';
  const done = new Promise<string[]>((resolve) => {
    sock.setEncoding('utf8');
    sock.on('data', (s: string) => {
      buf += s;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        seen.push(`reply ${buf.slice(0, i)}`);
        buf = buf.slice(i + 1);
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => resolve([...seen, 'closed']));
  });
  const sent = new Promise<void>((resolve) => sock.connect(port, host, () => sock.write(`${line}\n`, () => resolve())));
  return { sent, done };
}

/**
 * A stand-in for the daemon behind the relay (half-open, as the daemon's TCP listener): answers
 * each line after 300 ms, and ends its side once its answers are written; counts lines received.
 */
function slowEcho(): Promise<{ server: Server; port: number; received: () => number }> {
  let received = 0;
  const server = createServer({ allowHalfOpen: true }, (s) => {
    let pending = 0;
    let ended = false;
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      const lines = d.split('\n').length - 1;
      received += lines;
      pending += lines;
      setTimeout(() => {
        s.write(`{"jsonrpc":"2.0","id":1,"result":"${d.trim().length}"}\n`);
        pending -= lines;
        if (ended && pending === 0) s.end();
      }, 300);
    });
    s.on('end', () => {
      ended = true;
      if (pending === 0) s.end();
    });
    s.on('error', () => {});
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, port: (server.address() as { port: number }).port, received: () => received }),
    ),
  );
}

interface Row {
  name: string;
  /** The argv of a normal start, on free ports. */
  argv(dir: string): Promise<string[]>;
  /** Starts a call that is under way when SIGTERM comes (resolves once it is). */
  inFlight(listening: Record<string, unknown>): Promise<InFlight>;
  /** What the client must have seen: the reply before the end. */
  expectDrained(seen: string[]): void;
  /** An argv whose last listener's port is `busy` (something is opened before it), and the stderr line. */
  conflict(dir: string, busy: number): Promise<{ argv: string[]; stderr: string }>;
}

let target: Awaited<ReturnType<typeof slowEcho>> | null = null;

const ROWS: Row[] = [
  {
    name: 'signal-daemon',
    argv: async (dir) => [
      bin('signal-daemon'),
      ...['--account', '+15550000041', '--http', '127.0.0.1:0', '--tcp', '127.0.0.1:0'],
      ...['--localnet', join(dir, 'net.sqlite'), '--data-dir', join(dir, 'data')],
    ],
    // A long poll: the stop ends it at once, and its (empty) answer goes out before the connection closes.
    inFlight: async (rec) => {
      const tcp = parseHostPort(rec.tcp as string);
      const call = lineCall(tcp.port, tcp.host, '{"jsonrpc":"2.0","id":7,"method":"receive","params":{"timeout":60}}');
      await call.sent;
      await new Promise((r) => setTimeout(r, 300));
      return { done: call.done };
    },
    expectDrained: (seen) => {
      const replies = seen.filter((s) => s.startsWith('reply '));
      expect(replies.map((r) => JSON.parse(r.slice(6)))).toContainEqual(expect.objectContaining({ id: 7 }));
      expect(seen.at(-1)).toBe('closed');
    },
    conflict: async (dir, busy) => ({
      // The backend, the inbox and the HTTP listener are open when the TCP listen fails.
      argv: [
        bin('signal-daemon'),
        ...['--account', '+15550000042', '--http', `127.0.0.1:${await freePort()}`, '--tcp', `127.0.0.1:${busy}`],
        ...['--localnet', join(dir, 'net.sqlite'), '--data-dir', join(dir, 'data')],
      ],
      stderr: `signal-daemon: cannot listen for TCP on 127.0.0.1:${busy}: address already in use\n`,
    }),
  },
  {
    name: 'inference-server',
    argv: async (dir) => [
      bin('inference-server'),
      'serve',
      ...['--model', MODEL, '--model-id', 'tiny', '--http', '127.0.0.1:0', '--threads', '1'],
      ...['--context-size', '2048', '--access-log', join(dir, 'access.log')],
    ],
    // A streaming completion that has begun: within the grace, it ends as it would have.
    inFlight: async (rec) => {
      const addr = parseHostPort(rec.http as string);
      const stream = await until(
        'the model',
        async () => {
          const r = await fetch(`http://127.0.0.1:${addr.port}/health`).catch(() => null);
          return r?.status === 200;
        },
        60_000,
      ).then(() =>
        SseCompletion.open(addr, {
          model: 'tiny',
          messages: [{ role: 'user', content: 'hello' }],
          max_tokens: 200,
        }),
      );
      await stream.waitFor(2);
      return {
        done: stream.waitEnd(60_000).then(() => [...stream.events.map((e) => `reply ${e}`), 'closed']),
      };
    },
    expectDrained: (seen) => {
      expect(seen.slice(-2)).toEqual(['reply [DONE]', 'closed']);
      const last = JSON.parse(seen.at(-3)!.slice(6));
      expect(last.error).toBeUndefined();
      expect(last.choices[0].finish_reason).toMatch(/^(length|stop)$/);
    },
    conflict: async (dir, busy) => ({
      // The access log is open when the listen fails.
      argv: [
        bin('inference-server'),
        'serve',
        ...['--model', MODEL, '--model-id', 'tiny', '--http', `127.0.0.1:${busy}`, '--threads', '1'],
        ...['--access-log', join(dir, 'access.log')],
      ],
      stderr: `inference-server: cannot listen for HTTP on 127.0.0.1:${busy}: address already in use\n`,
    }),
  },
  {
    name: 'tcp-relay',
    argv: async () => {
      target ??= await slowEcho();
      return [bin('tcp-relay'), '--listen', '127.0.0.1:0', '--target', `127.0.0.1:${target.port}`];
    },
    // A request the target is still answering: the relay forwards the answer, then closes.
    inFlight: async (rec) => {
      const listen = parseHostPort(rec.listen as string);
      const before = target!.received();
      const call = lineCall(listen.port, listen.host, '{"jsonrpc":"2.0","id":1,"method":"version"}');
      await until('the target has the request', () => target!.received() > before);
      return { done: call.done };
    },
    expectDrained: (seen) => expect(seen).toEqual([expect.stringMatching(/^reply .*"id":1/), 'closed']),
    conflict: async (_dir, busy) => ({
      argv: [bin('tcp-relay'), '--listen', `127.0.0.1:${busy}`, '--target', '127.0.0.1:1'],
      stderr: `tcp-relay: cannot listen for guests on 127.0.0.1:${busy}: address already in use\n`,
    }),
  },
];

describe.each(ROWS)('$name: the one lifecycle', (row) => {
  const children: ChildProcess[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGKILL');
        await exited(c);
      }
    }
  });
  afterAll(() => {
    target?.server.close();
    target = null;
  });

  it('SIGTERM: the call under way is answered before its connection closes; listening once, then stopping, stopped; exit 0', async () => {
    const dir = join(tmp.dir, `${row.name}-stop`);
    const r = run(await row.argv(dir));
    children.push(r.child);
    await until('listening', () => r.log().some((l) => l.msg === 'listening'), 30_000);
    const call = await row.inFlight(r.log().find((l) => l.msg === 'listening')!);
    r.child.kill('SIGTERM');
    const seen = await call.done;
    expect(await exited(r.child)).toEqual({ code: ExitCode.OK, signal: null });
    row.expectDrained(seen);
    const steps = r
      .log()
      .map((l) => l.msg)
      .filter((m) => m === 'listening' || m === 'stopping' || m === 'stopped');
    expect(steps.filter((m) => m === 'listening')).toHaveLength(1);
    // The signal's `stopping` (with the signal), the service's (with its grace), then `stopped` last.
    expect(steps).toEqual(['listening', 'stopping', 'stopping', 'stopped']);
    expect(r.log().filter((l) => l.msg === 'stopping')).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ signal: 'SIGTERM' }),
        expect.objectContaining({ graceMs: expect.any(Number) }),
      ]),
    );
  });

  it('a listen conflict unwinds what was opened: the process ends by itself with exit 1 and one line', async () => {
    const busy = await new Promise<Server>((resolve) => {
      const s = createServer();
      s.listen(0, '127.0.0.1', () => resolve(s));
    });
    try {
      const dir = join(tmp.dir, `${row.name}-conflict`);
      const { argv, stderr } = await row.conflict(dir, (busy.address() as { port: number }).port);
      const r = run(argv);
      children.push(r.child);
      // No signal is sent: a resource left open (a timer, a database, a listener) would keep it running.
      expect(await exited(r.child)).toEqual({ code: ExitCode.FAILURE, signal: null });
      expect(r.err()).toBe(stderr);
      expect(r.log().some((l) => l.msg === 'listening')).toBe(false);
    } finally {
      busy.close();
    }
  });
});

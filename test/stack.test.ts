/**
 * The whole stack, end to end, started the way `pnpm start` starts it (`vigil start`) on free
 * loopback ports, under umask 022: the health check passes; a message from a second local account
 * arrives on the daemon's event stream and through the relay; the inference server killed with -9
 * is started again by the supervisor (one line), a SIGSTOPped one is replaced by `vigil restart`;
 * a fatal line in its log makes the guardian fall back, and `guardian restore` brings the primary
 * back; a killed daemon is started again by the supervisor, one stopped on purpose is brought back
 * by `health-check --fix`; every file under the home is private;
 * `vigil status` shows it on one screen and `vigil logs` prints a service's log; Ctrl-C (or
 * `vigil stop`) stops everything, leaving no process behind.
 */

import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync, existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { findProcesses, pidAlive } from '../packages/shared-types/src/node/index.js';
import { SseClient, spawnDaemon, TcpClient, tmpDir } from '../packages/signal-daemon/test/helpers.js';
import { exited, freePort, until } from './support.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VIGIL = `${ROOT}packages/stack/bin/vigil.js`;
const GUARDIAN = `${ROOT}packages/guardian/bin/guardian.js`;
const HEALTH = `${ROOT}packages/health-check/bin/health-check.js`;

function run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

interface Ports {
  http: number;
  tcp: number;
  relay: number;
  inference: number;
  mtls: number;
  page: number;
}

let home: { dir: string; cleanup: () => void };
let ports: Ports;
let stack: ChildProcess;
let out = '';

const path = (p: string) => `${home.dir}/${p}`;
const events = (): Record<string, any>[] =>
  existsSync(path('logs/guardian.log'))
    ? readFileSync(path('logs/guardian.log'), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
    : [];
const status = async (): Promise<Record<string, { state: string; pid: number | null }>> => {
  const r = await run([VIGIL, '--home', home.dir, 'status', '--json']);
  expect(r.code).toBe(0);
  return Object.fromEntries(
    (JSON.parse(r.stdout).services as { name: string; state: string; pid: number | null }[]).map((s) => [s.name, s]),
  );
};
async function complete(): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${ports.inference}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'vigil', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
  }).catch(() => null);
  return res ? { status: res.status, body: await res.json().catch(() => null) } : { status: 0, body: null };
}
/** Waits for guardian events, in this order, among those logged after `from` ("a|b": either). */
async function eventsInOrder(from: number, names: string[], timeoutMs: number): Promise<Record<string, any>[]> {
  let found: Record<string, any>[] = [];
  await until(
    `guardian events ${names.join(', ')}`,
    () => {
      found = [];
      let i = 0;
      for (const e of events().slice(from)) {
        if (names[i]!.split('|').includes(e.event)) {
          found.push(e);
          i++;
          if (i === names.length) return true;
        }
      }
      return false;
    },
    timeoutMs,
  );
  return found;
}

describe('the whole stack', () => {
  beforeAll(async () => {
    home = tmpDir('vigil-stack-');
    ports = {
      http: await freePort(),
      tcp: await freePort(),
      relay: await freePort('127.0.0.2'),
      inference: await freePort(),
      mtls: await freePort(),
      page: await freePort(),
    };
    // Under the umask of a usual login shell (022): what the stack writes is private all the same.
    stack = spawn(
      '/bin/sh',
      [
        '-c',
        'umask 022 && exec "$0" "$@"',
        process.execPath,
        VIGIL,
        'start',
        '--home',
        home.dir,
        '--daemon-http',
        `127.0.0.1:${ports.http}`,
        '--daemon-tcp',
        `127.0.0.1:${ports.tcp}`,
        '--relay',
        `127.0.0.2:${ports.relay}`,
        '--inference',
        `127.0.0.1:${ports.inference}`,
        '--mtls',
        `127.0.0.1:${ports.mtls}`,
        '--status-page',
        `127.0.0.1:${ports.page}`,
        '--threads',
        '1',
        '--guardian-interval',
        '3',
        '--health-interval',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    stack.stdout!.setEncoding('utf8');
    stack.stderr!.setEncoding('utf8');
    stack.stdout!.on('data', (s: string) => {
      out += s;
    });
    stack.stderr!.on('data', (s: string) => {
      out += s;
    });
    await until('the stack to start', () => out.includes('vigil is running'), 120_000).catch((err) => {
      throw new Error(`${err.message}\n${out}`);
    });
  }, 150_000);

  afterAll(async () => {
    if (stack.exitCode === null) {
      stack.kill('SIGKILL');
      for (const p of await findProcesses({ match: [home.dir] })) process.kill(p.pid, 'SIGKILL');
    }
    home.cleanup();
  });

  it('prints what runs where', () => {
    for (const name of [
      'signal-daemon',
      'tcp-relay',
      'inference-server',
      'inference-fallback',
      'guardian',
      'health-check',
    ]) {
      expect(out).toMatch(new RegExp(`^  ${name}\\s+(\\d+|-)\\s+\\S`, 'm'));
    }
    expect(out).toContain(`http://127.0.0.1:${ports.http}/api/v1/rpc`);
    expect(out).toContain(`127.0.0.2:${ports.relay} → 127.0.0.1:${ports.tcp}`);
    expect(out).toContain(`http://127.0.0.1:${ports.inference}/v1, mutual TLS 127.0.0.1:${ports.mtls}`);
    expect(out).toContain('Press Ctrl-C to stop.');
  });

  it('health-check --json: every configured check ok (exit 0)', async () => {
    const r = await run([HEALTH, '--json', '--config', path('health.json')]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const checks = Object.fromEntries(
      (JSON.parse(r.stdout).checks as { name: string; status: string }[]).map((c) => [c.name, c.status]),
    );
    expect(checks).toMatchObject({ signal_port: 'ok', relay_link: 'ok', single_daemon: 'ok' });
    expect(Object.values(checks).every((s) => s === 'ok' || s === 'skipped')).toBe(true);
  });

  it('a message from a second local account arrives on the event stream and through the relay', async () => {
    const sse = await SseClient.open({ host: '127.0.0.1', port: ports.http });
    const viaRelay = await TcpClient.connect({ host: '127.0.0.2', port: ports.relay });
    const other = await spawnDaemon([
      '--account',
      '+15550000002',
      '--http',
      '127.0.0.1:0',
      '--tcp',
      'off',
      '--data-dir',
      path('other'),
      '--localnet',
      path('localnet.sqlite'),
    ]);
    try {
      const res = await fetch(`http://127.0.0.1:${other.http!.port}/api/v1/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'send',
          params: { recipient: ['+15550000001'], message: 'hello vigil' },
        }),
      });
      expect(((await res.json()) as any).result.results[0].type).toBe('SUCCESS');
      const [ev] = await sse.waitFor(1);
      expect(JSON.parse(ev!.data).envelope).toMatchObject({
        source: '+15550000002',
        dataMessage: { message: 'hello vigil' },
      });
      const note = await viaRelay.next(10_000);
      expect(note).toMatchObject({
        method: 'receive',
        params: { envelope: { dataMessage: { message: 'hello vigil' } } },
      });
      // A daemon of another account on the same network is not a duplicate of this one.
      const health = await run([HEALTH, '--json', '--config', path('health.json')]);
      expect(health.code).toBe(0);
      expect(JSON.parse(health.stdout).checks[2]).toMatchObject({ name: 'single_daemon', status: 'ok' });
    } finally {
      sse.close();
      viaRelay.close();
      other.child.kill('SIGKILL');
    }
  });

  it('vigil status: one screen (each service, pid, uptime, restarts; the last guardian event and health result)', async () => {
    const r = await run([VIGIL, '--home', home.dir, 'status']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^vigil running from ${home.dir} \\(supervisor pid ${stack.pid}, up \\d+ (s|min)`),
    );
    for (const name of ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page']) {
      expect(r.stdout).toMatch(new RegExp(`^  ${name}\\s+running\\s+\\d+\\s+\\d+ (s|min)( \\d+ s)?\\s+0\\s+-$`, 'm'));
    }
    expect(r.stdout).toMatch(/^ {2}inference-fallback\s+stopped\s+-\s+-\s+0\s+-$/m);
    expect(r.stdout).toMatch(/^ {2}guardian: {2}\w+/m);
    expect(r.stdout).toMatch(/^ {2}health: {4}healthy \(exit 0\) \d+ (s|min)/m);
    expect(r.stdout).toContain(`  page:      http://127.0.0.1:${ports.page}/\n`);
    const json = await run([VIGIL, '--home', home.dir, 'status', '--json']);
    const parsed = JSON.parse(json.stdout);
    expect(parsed.supervisor).toMatchObject({ pid: stack.pid, home: home.dir });
    expect(parsed.guardian.event).toEqual(expect.any(String));
    expect(parsed.health).toMatchObject({ exitCode: 0, checks: expect.any(Array) });
  });

  it("vigil logs SERVICE: the service's log; -n N its last lines", async () => {
    const all = await run([VIGIL, '--home', home.dir, 'logs', 'tcp-relay']);
    expect(all.code).toBe(0);
    expect(all.stdout).toBe(readFileSync(path('logs/tcp-relay.log'), 'utf8'));
    expect(all.stdout).toMatch(/"msg":"listening/);
    const last = await run([VIGIL, '--home', home.dir, 'logs', 'signal-daemon', '-n', '1']);
    expect(last.code).toBe(0);
    expect(last.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(readFileSync(path('logs/signal-daemon.log'), 'utf8').endsWith(last.stdout)).toBe(true);
  });

  it('kill -9 of the inference server: the supervisor says so in one line and serves it again within a restart delay', async () => {
    const before = (await status())['inference-server']!;
    expect(before.state).toBe('running');
    const seen = out.length;
    process.kill(before.pid!, 'SIGKILL');
    await until('the restart line', () =>
      out.slice(seen).includes('vigil: inference-server exited (signal SIGKILL); restarting in 1 s (restart 1)\n'),
    );
    await until('completions served again', async () => (await complete()).status === 200, 30_000);
    const after = (await status())['inference-server']!;
    // (The guardian may have restarted it too, while it loaded: restarts counts both.)
    expect(after).toMatchObject({ state: 'running', restarts: expect.any(Number) });
    expect((after as unknown as { restarts: number }).restarts).toBeGreaterThanOrEqual(1);
    expect(after.pid).not.toBe(before.pid);
    expect(out.slice(seen).match(/^vigil: inference-server exited/gm)).toHaveLength(1);
  }, 60_000);

  it("a hung (SIGSTOPped) inference server: `vigil restart` (the guardian's restart) replaces it", async () => {
    const before = (await status())['inference-server']!;
    process.kill(before.pid!, 'SIGSTOP');
    expect((await run([VIGIL, '--home', home.dir, 'restart', 'inference-server'])).code).toBe(0);
    await until('the stopped process gone', () => !pidAlive(before.pid!), 5000);
    await until('completions served again', async () => (await complete()).status === 200, 30_000);
    expect((await status())['inference-server']!.pid).not.toBe(before.pid);
  }, 60_000);

  it('a fatal line in the primary log: fallback_activated, the lock file, completions still served; restore brings the primary back', async () => {
    const from = events().length;
    appendFileSync(path('logs/inference-server.log'), 'Segmentation fault (core dumped)\n');
    const [activated] = await eventsInOrder(from, ['fallback_activated'], 30_000);
    expect(activated).toMatchObject({ level: expect.any(String) });
    expect(existsSync(path('state/inference-fallback.lock'))).toBe(true);
    expect(readFileSync(path('state/inference-fallback.lock'), 'utf8')).toContain('Segmentation fault');
    await until('the fallback answering', async () => (await complete()).status === 200, 30_000);
    let s = await status();
    expect(s['inference-fallback']!.state).toBe('running');
    expect(s['inference-server']!.state).toBe('stopped');
    // The guardian now watches the fallback (the completions above make it busy: probes may be deferred).
    const [, watched] = await eventsInOrder(from, ['fallback_activated', 'probe_ok|probe_skip_busy'], 20_000);
    if (watched!.event === 'probe_ok') expect(watched!.agent).toBe('inference-fallback');

    const restore = await run([GUARDIAN, 'restore', '--config', path('guardian.json')]);
    expect(restore.code).toBe(0);
    expect(existsSync(path('state/inference-fallback.lock'))).toBe(false);
    s = await status();
    expect(s['inference-server']!.state).toBe('running');
    expect(s['inference-fallback']!.state).toBe('stopped');
    await until('the primary answering', async () => (await complete()).status === 200, 30_000);
  }, 90_000);

  it('the daemon killed: the supervisor serves it again; stopped on purpose: health-check --fix brings it back', async () => {
    const before = (await status())['signal-daemon']!;
    const seen = out.length;
    process.kill(before.pid!, 'SIGKILL');
    await until('the restart line', () =>
      out.slice(seen).includes('vigil: signal-daemon exited (signal SIGKILL); restarting in 1 s (restart 1)\n'),
    );
    await until(
      'the daemon serving again',
      async () => (await run([HEALTH, '--config', path('health.json')])).code === 0,
      30_000,
    );
    const restarted = (await status())['signal-daemon']!;
    expect(restarted.pid).not.toBe(before.pid);

    // Stopped on purpose: the supervisor leaves it stopped; the health check repairs it.
    expect((await run([VIGIL, '--home', home.dir, 'stop', 'signal-daemon'])).code).toBe(0);
    expect((await status())['signal-daemon']!.state).toBe('stopped');
    const fixed = await run([HEALTH, '--fix', '--json', '--config', path('health.json')]);
    expect(fixed.code).toBe(1);
    const port = (JSON.parse(fixed.stdout).checks as { name: string; status: string; fix?: { action: string } }[])[0]!;
    expect(port).toMatchObject({
      name: 'signal_port',
      status: 'healed',
      fix: { action: 'restart the daemon through command' },
    });
    expect((await run([HEALTH, '--config', path('health.json')])).code).toBe(0);
    expect((await status())['signal-daemon']!.pid).not.toBe(restarted.pid);
  }, 90_000);

  it('started under umask 022, every file the stack wrote under its home is 0600 and every directory 0700', () => {
    // Exceptions, each with its reason: the certificates are public (their keys are 0600), and a
    // model holds no message, state, key or log (make-model writes both 0644 on purpose; the 0700
    // directories keep other users out all the same); the second account's daemon above was
    // started by this test, not by the stack.
    const readable = new Set(['pki/ca.pem', 'pki/server.pem', 'pki/client.pem', 'models/tiny.gguf']);
    const wrong: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = `${dir}/${entry.name}`;
        const name = full.slice(home.dir.length + 1);
        if (name === 'other') continue;
        const mode = lstatSync(full).mode & 0o777;
        if (entry.isDirectory()) {
          if (mode !== 0o700) wrong.push(`${name}/ ${mode.toString(8)}`);
          walk(full);
        } else if (entry.isSocket()) {
          if (mode & 0o077) wrong.push(`${name} (socket) ${mode.toString(8)}`);
        } else if (mode !== (readable.has(name) ? 0o644 : 0o600)) {
          wrong.push(`${name} ${mode.toString(8)}`);
        }
      }
    };
    expect(lstatSync(home.dir).mode & 0o777).toBe(0o700);
    walk(home.dir);
    expect(wrong).toEqual([]);
    // What the walk saw: the stack's logs, state, databases (with SQLite's -wal and -shm), keys, model.
    for (const p of [
      'logs/signal-daemon.log',
      'localnet.sqlite',
      'pki/server-key.pem',
      'models/tiny.gguf',
      'guardian.json',
      'run/stack.json',
    ])
      expect(existsSync(path(p))).toBe(true);
  });

  it('Ctrl-C stops everything, leaving no process behind', async () => {
    const pids = Object.values(await status())
      .map((s) => s.pid)
      .filter((p): p is number => p !== null);
    expect(pids.length).toBeGreaterThanOrEqual(4);
    stack.kill('SIGINT');
    expect(await exited(stack)).toEqual({ code: 0, signal: null });
    expect(out).toContain('vigil: stopped');
    expect(await findProcesses({ match: [home.dir] })).toEqual([]);
    // The relay's command line names its addresses, not the home.
    expect(await findProcesses({ program: 'tcp-relay', match: [`127.0.0.2:${ports.relay}`] })).toEqual([]);
    expect(existsSync(path('run/control.sock'))).toBe(false);
    expect((await run([VIGIL, '--home', home.dir, 'status'])).code).toBe(3);
  }, 60_000);
});

describe('starting the stack', () => {
  it('a port already in use: a clear message naming the port and its holder, exit 1, nothing left running', async () => {
    const other = tmpDir('vigil-stack-busy-');
    const port = await freePort();
    const holder = spawn(
      process.execPath,
      [`${ROOT}packages/health-check/test/fixtures/listen.mjs`, '127.0.0.1', String(port)],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    try {
      await new Promise((resolve) => holder.stdout!.once('data', resolve));
      const r = await run([
        VIGIL,
        'start',
        '--home',
        other.dir,
        '--daemon-http',
        `127.0.0.1:${port}`,
        '--health-interval',
        '0',
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(
        `vigil: port ${port} (127.0.0.1:${port}, the daemon (HTTP)) is already in use by pid ${holder.pid} (${process.execPath} ${ROOT}packages/health-check/test/fixtures/listen.mjs 127.0.0.1 ${port}). Stop it, or give --daemon-http another address.\n`,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
      expect(await findProcesses({ match: [other.dir] })).toEqual([]);
    } finally {
      holder.kill();
      other.cleanup();
    }
  });

  it('after a kill -9 of the supervisor, the next start stops what it left and runs; vigil stop leaves nothing', async () => {
    const home = tmpDir('vigil-stack-left-');
    const relay = `127.0.0.2:${await freePort('127.0.0.2')}`;
    // The stack's processes: all name the home, but the relay only its addresses.
    const ours = async () => [
      ...(await findProcesses({ match: [home.dir] })),
      ...(await findProcesses({ program: 'tcp-relay', match: [relay] })),
    ];
    const args = [
      VIGIL,
      'start',
      '--home',
      home.dir,
      '--daemon-http',
      `127.0.0.1:${await freePort()}`,
      '--daemon-tcp',
      `127.0.0.1:${await freePort()}`,
      '--relay',
      relay,
      '--inference',
      `127.0.0.1:${await freePort()}`,
      '--mtls',
      'off',
      '--status-page',
      `127.0.0.1:${await freePort()}`,
      '--threads',
      '1',
      '--health-interval',
      '0',
    ];
    const launch = () => {
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout!.on('data', (d) => {
        text += d;
      });
      child.stderr!.on('data', (d) => {
        text += d;
      });
      return { child, out: () => text };
    };
    try {
      const first = launch();
      await until('the first stack', () => first.out().includes('vigil is running'), 120_000);
      first.child.kill('SIGKILL');
      await exited(first.child);
      expect(await ours()).toHaveLength(5); // its services outlive it
      const second = launch();
      await until('the second stack', () => /vigil is running|^vigil: .*(in use|cannot)/m.test(second.out()), 120_000);
      for (const name of ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page']) {
        expect(second.out()).toMatch(
          new RegExp(`vigil: stopping ${name} \\(pid \\d+\\) left by a stack that did not stop cleanly`),
        );
      }
      expect(second.out()).toContain('vigil is running');
      // `vigil stop` stops it as Ctrl-C does (Ctrl-C itself: above), and returns once all has ended.
      const stop = await run([VIGIL, '--home', home.dir, 'stop']);
      expect(stop).toMatchObject({ code: 0, stderr: '' });
      expect(await exited(second.child)).toEqual({ code: 0, signal: null });
      expect(second.out()).toContain('vigil: stopped');
      expect(await ours()).toEqual([]);
    } finally {
      for (const p of await ours()) process.kill(p.pid, 'SIGKILL');
      home.cleanup();
    }
  }, 200_000);

  it('bad usage exits 78 (as every vigil binary) with the usage; --help exits 0', async () => {
    const bad = await run([VIGIL, 'start', '--daemon-http', 'nope']);
    expect(bad.code).toBe(78);
    expect(bad.stderr).toMatch(
      /^vigil: --daemon-http: invalid port "nope": expected an integer from 0 to 65535\n\nUsage: /,
    );
    const help = await run([VIGIL, 'start', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--guardian-interval');
  });
});

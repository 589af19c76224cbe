/**
 * The control socket and its client, the `vigil` binary: a supervisor in this process runs small
 * stand-in services; `vigil status|start|stop|restart|logs` drive it as the guardian and the
 * health check do.
 */
import { execFile } from 'node:child_process';
import type { Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { pidAlive } from '@vigil/shared-types/node';
import { until } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { controlRequest, serveControl } from '../src/control.js';
import { NoStackError } from '../src/errors.js';
import { homePaths } from '../src/paths.js';
import { makeHome } from '../src/prepare.js';
import { SERVICE_NAMES, type ServiceName, type ServiceSpec } from '../src/services.js';
import { Supervisor } from '../src/supervisor.js';

const VIGIL = fileURLToPath(new URL('../bin/vigil.js', import.meta.url));

function vigil(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [VIGIL, ...args], { timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

/** A stand-in service: says it is up, then waits for SIGTERM. */
const standIn = (name: ServiceName): ServiceSpec => ({
  name,
  argv: ['-e', `console.log("${name} up"); setInterval(() => {}, 1000)`],
  autostart: name !== 'inference-fallback',
  ready: { kind: 'log', pattern: /up/ },
  readyTimeoutMs: 5000,
  serves: name,
});

describe('vigil against a running supervisor', () => {
  const home = tmpDir('vigil-control-');
  const paths = homePaths(home.dir);
  const said: string[] = [];
  let supervisor: Supervisor;
  let control: Server;

  beforeAll(async () => {
    makeHome(paths);
    const specs = Object.fromEntries(SERVICE_NAMES.map((n) => [n, standIn(n)])) as Record<ServiceName, ServiceSpec>;
    supervisor = new Supervisor(specs, paths, (l) => said.push(l));
    control = await serveControl(paths.socket, (r) =>
      r.action === 'shutdown' ? Promise.resolve({ ok: false, error: 'not here' }) : supervisor.handle(r),
    );
    for (const n of SERVICE_NAMES) if (specs[n].autostart) supervisor.start(n);
  });

  afterAll(async () => {
    await supervisor.stopAll();
    control.close();
    home.cleanup();
  });

  it('status: one screen, and --json', async () => {
    await until('the stand-ins up', () => supervisor.status().filter((s) => s.state === 'running').length === 5);
    const screen = await vigil('--home', home.dir, 'status');
    expect(screen.stderr).toBe('');
    expect(screen.code).toBe(0);
    expect(screen.stdout).toMatch(new RegExp(`^vigil running from ${home.dir} \\(supervisor pid ${process.pid}, up `));
    expect(screen.stdout).toMatch(/^ {2}service\s+state\s+pid\s+uptime\s+restarts\s+last exit$/m);
    expect(screen.stdout).toMatch(/^ {2}guardian\s+running\s+\d+\s+\d+ s\s+0\s+-$/m);
    expect(screen.stdout).toMatch(/^ {2}inference-fallback\s+stopped\s+-\s+-\s+0\s+-$/m);
    expect(screen.stdout).toContain('  guardian:  no event yet\n');
    expect(screen.stdout).toContain('  health:    no health check has run yet\n');
    const json = JSON.parse((await vigil('--home', home.dir, 'status', '--json')).stdout);
    expect(json.services.map((s: { name: string }) => s.name)).toEqual([...SERVICE_NAMES]);
    expect(json).toMatchObject({ supervisor: { pid: process.pid, home: home.dir }, guardian: null, health: null });
  });

  it('restart SERVICE returns once the old process has ended and the new one is started', async () => {
    const old = supervisor.pidOf('tcp-relay')!;
    const r = await vigil('--home', home.dir, 'restart', 'tcp-relay');
    expect(r.code).toBe(0);
    const pid = supervisor.pidOf('tcp-relay')!;
    expect(r.stdout).toBe(`tcp-relay started (pid ${pid})\n`);
    expect(pid).not.toBe(old);
    expect(pidAlive(old)).toBe(false);
    expect(supervisor.status().find((s) => s.name === 'tcp-relay')).toMatchObject({ restarts: 1, starts: 2 });
    expect(said).toEqual([]); // an expected exit is no news
  });

  it('stop SERVICE and start SERVICE', async () => {
    const old = supervisor.pidOf('signal-daemon')!;
    expect(await vigil('--home', home.dir, 'stop', 'signal-daemon')).toMatchObject({ code: 0 });
    expect(pidAlive(old)).toBe(false);
    expect(supervisor.pidOf('signal-daemon')).toBeNull();
    const started = await vigil('--home', home.dir, 'start', 'signal-daemon');
    expect(started.code).toBe(0);
    expect(started.stdout).toBe(`signal-daemon started (pid ${supervisor.pidOf('signal-daemon')})\n`);
  });

  it('a service that ends by itself is said, shown restarting with its last exit, and started again', async () => {
    const old = supervisor.pidOf('inference-server')!;
    process.kill(old, 'SIGKILL');
    await until('the exit seen', () => supervisor.pidOf('inference-server') === null);
    expect(said).toEqual(['vigil: inference-server exited (signal SIGKILL); restarting in 1 s (restart 1)']);
    expect((await vigil('--home', home.dir, 'status')).stdout).toMatch(
      /^ {2}inference-server\s+restarting\s+-\s+restart in [01] s\s+0\s+SIGKILL at \S+$/m,
    );
    await until('started again', () => supervisor.pidOf('inference-server') !== null, 5000);
    expect(supervisor.pidOf('inference-server')).not.toBe(old);
    expect(supervisor.status().find((s) => s.name === 'inference-server')).toMatchObject({
      state: 'running',
      restarts: 1,
      lastExit: { code: null, signal: 'SIGKILL' },
    });
    expect(said).toHaveLength(1);
  });

  it('an unknown service is refused (exit 1), naming the known ones', async () => {
    const r = await vigil('--home', home.dir, 'restart', 'nginx');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'vigil: unknown service "nginx" (known: signal-daemon, tcp-relay, inference-server, inference-fallback, guardian, status-page)\n',
    );
  });

  it('logs SERVICE prints its log; -n 1 its last line; a log not yet there exits 1', async () => {
    await until(
      'the relay said it twice',
      async () => (await vigil('--home', home.dir, 'logs', 'tcp-relay')).stdout === 'tcp-relay up\ntcp-relay up\n',
    );
    expect((await vigil('--home', home.dir, 'logs', 'tcp-relay', '-n', '1')).stdout).toBe('tcp-relay up\n');
    const none = await vigil('--home', home.dir, 'logs', 'health-check');
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^vigil: no log yet at .*state\/health\.log/);
    expect((await vigil('--home', home.dir, 'logs', 'nginx')).code).toBe(78);
    expect((await vigil('--home', home.dir, 'logs', 'guardian', '-n', 'x')).code).toBe(78);
  });
});

describe('vigil with no stack running', () => {
  it('exits 3 naming the home', async () => {
    const home = tmpDir('vigil-none-');
    try {
      for (const args of [['status'], ['stop'], ['restart', 'guardian']]) {
        const r = await vigil('--home', home.dir, ...args);
        expect(r.code).toBe(3);
        expect(r.stderr).toMatch(new RegExp(`^vigil: no vigil stack is running from ${home.dir} \\(`));
      }
      await expect(controlRequest(home.dir, `${home.dir}/run/control.sock`, { action: 'status' })).rejects.toThrow(
        NoStackError,
      );
    } finally {
      home.cleanup();
    }
  });
});

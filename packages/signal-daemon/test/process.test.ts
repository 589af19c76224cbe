import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { BIN, exited, http, rpc, SseClient, spawnDaemon, tmpDir } from './helpers.js';

const run = promisify(execFile);
const A = '+15550000001';

async function cli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      timeout: 15_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

function occupy(): Promise<Server> {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

describe('signal-daemon as a process', () => {
  it('logs its bound addresses as one JSON record, serves, and exits 0 on SIGTERM with SSE streams closed', async () => {
    const tmp = tmpDir();
    const d = await spawnDaemon([
      '--account',
      A,
      '--http',
      ':0',
      '--tcp',
      ':0',
      '--localnet',
      join(tmp.dir, 'n.sqlite'),
      '--data-dir',
      join(tmp.dir, 'a'),
    ]);
    try {
      const rec = JSON.parse(
        d
          .output()
          .split('\n')
          .find((l) => l.includes('"listening"'))!,
      );
      expect(rec).toMatchObject({
        level: 'info',
        msg: 'listening',
        account: A,
        http: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      });
      expect((await rpc(d.http!, 'version')).result.version).toBe(rec.version);
      const sse = await SseClient.open(d.http!);
      d.child.kill('SIGTERM');
      expect(await exited(d.child)).toEqual({ code: 0, signal: null });
      await new Promise((r) => setTimeout(r, 50));
      expect(sse.ended).toBe(true);
    } finally {
      d.child.kill('SIGKILL');
      tmp.cleanup();
    }
  });

  it('takes every flag from its environment variable too', async () => {
    const tmp = tmpDir();
    const d = await spawnDaemon([], {
      SIGNAL_DAEMON_ACCOUNT: A,
      SIGNAL_DAEMON_HTTP: '127.0.0.1:0',
      SIGNAL_DAEMON_TCP: 'off',
      SIGNAL_DAEMON_LOCALNET: join(tmp.dir, 'n.sqlite'),
      SIGNAL_DAEMON_DATA_DIR: join(tmp.dir, 'a'),
      SIGNAL_DAEMON_PROFILE_NAME: 'From Env',
    });
    try {
      expect(d.tcp).toBeNull();
      const status = await http(d.http!, {
        method: 'GET',
        path: '/api/v1/check',
        headers: { accept: 'application/json' },
      });
      expect(status.json()).toMatchObject({ account: A });
    } finally {
      d.child.kill('SIGKILL');
      tmp.cleanup();
    }
  });

  it('says "address already in use" and exits 1 when its port is taken', async () => {
    const tmp = tmpDir();
    const busy = await occupy();
    try {
      const port = (busy.address() as { port: number }).port;
      const r = await cli([
        '--account',
        A,
        '--http',
        `127.0.0.1:${port}`,
        '--tcp',
        'off',
        '--localnet',
        join(tmp.dir, 'n.sqlite'),
        '--data-dir',
        join(tmp.dir, 'a'),
      ]);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`signal-daemon: cannot listen for HTTP on 127.0.0.1:${port}: address already in use\n`);
    } finally {
      busy.close();
      tmp.cleanup();
    }
  });

  it('refuses a non-loopback address unless allowed, and bad flags, with exit 78', async () => {
    const tmp = tmpDir();
    const common = ['--localnet', join(tmp.dir, 'n.sqlite'), '--data-dir', join(tmp.dir, 'a')];
    try {
      const wild = await cli(['--account', A, '--http', '0.0.0.0:0', '--tcp', 'off', ...common]);
      expect(wild.code).toBe(78);
      expect(wild.stderr).toContain('refusing to listen for http on non-loopback address 0.0.0.0');
      expect((await cli(['--account', 'alice', ...common])).stderr).toContain('invalid account "alice"');
      expect((await cli(['--account', A, '--http', 'x:99999', ...common])).code).toBe(78);
      expect((await cli(['--account', A, '--receive-mode', 'sometimes', ...common])).code).toBe(78);
      const missing = await cli(common);
      expect(missing.code).toBe(78);
      expect(missing.stderr).toContain("required option '-a, --account <number>' not specified");
    } finally {
      tmp.cleanup();
    }
  });
});

import { execFile, spawn, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import { echoServer, TcpClient } from './helpers.js';

const BIN = fileURLToPath(new URL('../bin/tcp-relay.js', import.meta.url));
const DRIVER = fileURLToPath(new URL('./fixtures/netns-driver.mjs', import.meta.url));
const run = promisify(execFile);

async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stderr: string }> {
  try {
    const { stderr } = await run(process.execPath, [BIN, ...args], {
      timeout: 10_000,
      env: { ...process.env, ...env },
    });
    return { code: 0, stderr };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

describe('tcp-relay as a process', () => {
  it('says "address already in use" and exits 1 when the port is taken', async () => {
    const busy: Server = await new Promise((resolve) => {
      const s = createServer();
      s.listen(0, '127.0.0.2', () => resolve(s));
    });
    try {
      const port = (busy.address() as { port: number }).port;
      const r = await cli(['--listen', `127.0.0.2:${port}`, '--target', '127.0.0.1:1']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`tcp-relay: cannot listen for guests on 127.0.0.2:${port}: address already in use\n`);
    } finally {
      busy.close();
    }
  });

  it('refuses bad flags with exit 78', async () => {
    expect((await cli(['--allow', '10.0.0.0/40'])).code).toBe(78);
    expect((await cli(['--listen', 'nowhere'])).code).toBe(78);
    expect((await cli(['--max-connections', '0'])).stderr).toContain('expected a positive integer');
    const bad = await cli(['--listen', '127.0.0.3:0'], { TCP_RELAY_ALLOW_FILE_PARAMS: 'maybe' });
    expect(bad).toEqual({
      code: 78,
      stderr: 'tcp-relay: TCP_RELAY_ALLOW_FILE_PARAMS: expected 1 or 0 (true/false, yes/no), got "maybe"\n',
    });
  });

  it('documents --allow-file-params and says in its first log line whether file parameters are refused', async () => {
    const help = await run(process.execPath, [BIN, '--help']);
    expect(help.stdout).toContain('--allow-file-params');
    const listening = async (args: string[], env: NodeJS.ProcessEnv) => {
      const p = spawn(process.execPath, [BIN, '--listen', '127.0.0.3:0', '--target', '127.0.0.1:1', ...args], {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      const line = await new Promise<Record<string, unknown>>((resolve) =>
        p.stdout!.on('data', (d) => {
          out += d;
          const l = out.split('\n').find((x) => x.includes('"msg":"listening"'));
          if (l) resolve(JSON.parse(l));
        }),
      );
      p.kill('SIGKILL');
      return line.fileParams;
    };
    expect(await listening([], {})).toBe('refused');
    expect(await listening([], { TCP_RELAY_ALLOW_FILE_PARAMS: '0' })).toBe('refused');
    expect(await listening(['--allow-file-params'], {})).toBe('allowed');
    expect(await listening([], { TCP_RELAY_ALLOW_FILE_PARAMS: 'true' })).toBe('allowed');
    expect(await listening(['--filter', 'off'], {})).toBe('off');
  });

  it('relays, and exits 0 on SIGTERM', async () => {
    const echo = await echoServer();
    const relay = spawn(process.execPath, [BIN, '--listen', '127.0.0.3:0', '--target', `127.0.0.1:${echo.addr.port}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const port = await new Promise<number>((resolve) => {
        let out = '';
        relay.stdout!.on('data', (d) => {
          out += d;
          const m =
            /"msg":"listening".*"listen":"127\.0\.0\.3:(\d+)"|"listen":"127\.0\.0\.3:(\d+)".*"msg":"listening"/.exec(
              out,
            );
          if (m) resolve(Number(m[1] ?? m[2]));
        });
      });
      const c = await TcpClient.connect({ host: '127.0.0.3', port });
      c.write('{"x":1}\n');
      expect(await c.next()).toEqual({ x: 1 });
      c.close();
      relay.kill('SIGTERM');
      const code = await new Promise((resolve) => relay.once('exit', (c) => resolve(c)));
      expect(code).toBe(0);
    } finally {
      relay.kill('SIGKILL');
      echo.close();
    }
  });
});

// A network namespace of the test's own, where the loopback interface starts down: the listen
// address is absent, then present, then gone, then back, as the VM link address is.
const netns = spawnSync('unshare', ['-rn', 'true']).status === 0;
if (!netns) console.warn('tcp-relay: unshare -rn is not permitted here; the link-address test is skipped');

(netns ? describe : describe.skip)('a listen address that comes and goes', () => {
  it('waits for it, binds when it appears, notices when it goes, and binds again', async () => {
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn('unshare', ['-rn', process.execPath, DRIVER, BIN], { stdio: ['ignore', 'pipe', 'inherit'] });
      let s = '';
      p.stdout!.on('data', (d) => {
        s += d;
      });
      p.on('exit', () => resolve(s));
      p.on('error', reject);
    });
    const result = JSON.parse(out.trim().split('\n').at(-1)!);
    expect(result).toMatchObject({ ok: true, echoes: ['ping\n', 'ping\n'] });
    expect(result.steps.map((s: { name: string }) => s.name)).toEqual([
      'waiting while absent',
      'bound once present',
      'noticed it went away',
      'bound again',
    ]);
  }, 30_000);
});

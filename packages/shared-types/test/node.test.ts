import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ConfigError, defineErrors, ExitCode, strictObject, VigilError, z } from '../src/index.js';
import {
  acquireLock,
  cliExitCode,
  closeServer,
  ensureDir,
  killAll,
  ListenError,
  LockBusyError,
  listen,
  listProcesses,
  pidAlive,
  procPids,
  readConfigFile,
  removeFile,
  runCommand,
  runsProgram,
  writeFileAtomic,
  writeFileAtomicWith,
} from '../src/node/index.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'vigil-node-'));
const mode = (p: string) => statSync(p).mode & 0o777;

describe('atomic writes', () => {
  it('writes 0600 files in 0700 directories whatever the umask, and leaves no temporary', async () => {
    const old = process.umask(0o022);
    try {
      const dir = join(tmp(), 'a', 'b');
      writeFileAtomic(join(dir, 'state.json'), '{"x":1}');
      expect(readFileSync(join(dir, 'state.json'), 'utf8')).toBe('{"x":1}');
      expect(mode(join(dir, 'state.json'))).toBe(0o600);
      expect(mode(dir)).toBe(0o700);
      expect(mode(join(dir, '..'))).toBe(0o700);
      writeFileAtomic(join(dir, 'state.json'), 'second', { mode: 0o644 });
      expect(readFileSync(join(dir, 'state.json'), 'utf8')).toBe('second');
      expect(mode(join(dir, 'state.json'))).toBe(0o644);
      await writeFileAtomicWith(join(dir, 'big'), async (fh) => {
        await fh.write(Buffer.alloc(1000, 1));
        await fh.write(Buffer.alloc(24, 2));
      });
      expect(statSync(join(dir, 'big')).size).toBe(1024);
      expect(readdirSync(dir).sort()).toEqual(['big', 'state.json']);
    } finally {
      process.umask(old);
    }
  });

  it('a failed streaming write leaves the old file and no temporary', async () => {
    const dir = tmp();
    writeFileAtomic(join(dir, 'f'), 'old');
    await expect(
      writeFileAtomicWith(join(dir, 'f'), async (fh) => {
        await fh.write('partial');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(readFileSync(join(dir, 'f'), 'utf8')).toBe('old');
    expect(readdirSync(dir)).toEqual(['f']);
    expect(removeFile(join(dir, 'f'))).toBe(true);
    expect(removeFile(join(dir, 'f'))).toBe(false);
  });

  it('ensureDir enforces the mode of an existing directory only when asked', () => {
    const dir = join(tmp(), 'd');
    ensureDir(dir, 0o755);
    expect(mode(dir)).toBe(0o755);
    ensureDir(dir, 0o700);
    expect(mode(dir)).toBe(0o755);
    ensureDir(dir, 0o700, true);
    expect(mode(dir)).toBe(0o700);
  });
});

describe('processes', () => {
  it('pidAlive: a zombie (exited, not reaped) is dead; a live child is alive', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 200)'], { stdio: 'ignore' });
    const pid = child.pid!;
    expect(pidAlive(pid)).toBe(true);
    // Not reaped until the 'exit' handler runs: poll /proc while the event loop is held.
    const deadline = Date.now() + 5000;
    let zombie = false;
    while (Date.now() < deadline) {
      const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
      if (state === 'Z') {
        zombie = true;
        break;
      }
    }
    expect(zombie).toBe(true);
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(0)).toBe(false);
    expect(pidAlive(-1)).toBe(false);
  });

  it('killAll kills a process that ignores SIGTERM and one that is stopped', async () => {
    const ignoring = spawn(process.execPath, ['-e', "process.on('SIGTERM',()=>{}); setInterval(()=>{},1000)"], {
      stdio: 'ignore',
    });
    const stopped = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 300));
    process.kill(stopped.pid!, 'SIGSTOP');
    const t0 = Date.now();
    expect(await killAll([ignoring.pid!, stopped.pid!], 300)).toBe(true);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(pidAlive(ignoring.pid!)).toBe(false);
    expect(pidAlive(stopped.pid!)).toBe(false);
  });

  it('procPids: the pids of a /proc listing in number order (Node lists names as strings: 10001 before 9967)', () => {
    expect(procPids(['1', '10001', '13', '9967', 'self', 'sys', '100'])).toEqual([1, 13, 100, 9967, 10001]);
    expect(procPids(['net', 'thread-self'])).toEqual([]);
  });

  it('listProcesses: every process with its command line, by pid, this one among them', async () => {
    const all = await listProcesses();
    const me = all.find((p) => p.pid === process.pid);
    expect(me?.command).toContain(process.argv[1]!.split('/').pop()!);
    const pids = all.map((p) => p.pid);
    expect(pids).toEqual([...pids].sort((a, b) => a - b));
  });

  it('runsProgram: the executable, or a script node runs, by name, name.js or full path', () => {
    const argv = ['/usr/bin/node', '--enable-source-maps', '/opt/vigil/bin/signal-daemon.js', '-a', '+1'];
    expect(runsProgram(argv, 'signal-daemon')).toBe(true);
    expect(runsProgram(argv, 'signal-daemon.js')).toBe(true);
    expect(runsProgram(argv, '/opt/vigil/bin/signal-daemon.js')).toBe(true);
    expect(runsProgram(argv, '/elsewhere/signal-daemon.js')).toBe(false);
    expect(runsProgram(['/usr/local/bin/signal-daemon', '-a', '+1'], 'signal-daemon')).toBe(true);
    expect(runsProgram(['tail', '-f', 'signal-daemon.log'], 'signal-daemon')).toBe(false);
    expect(runsProgram(['vim', 'signal-daemon.js'], 'signal-daemon')).toBe(false);
  });
});

describe('runCommand', () => {
  it("follows timeout(1)'s conventions: exit status, 124 timed out, 127 not found, 128+n signal", async () => {
    const ok = await runCommand(['sh', '-c', 'echo out; echo err >&2; exit 3'], 5000);
    expect(ok).toMatchObject({ rc: 3, stdout: 'out\n', stderr: 'err\n', detail: 'err' });
    expect((await runCommand(['sleep', '5'], 100)).rc).toBe(124);
    expect((await runCommand(['/nonexistent/program'], 1000)).rc).toBe(127);
    expect((await runCommand(['sh', '-c', 'kill -9 $$'], 5000)).rc).toBe(128 + 9);
    expect((await runCommand([], 1000)).rc).toBe(127);
  });
});

describe('locks', () => {
  it('one holder at a time; a dead holder is taken over; a live one is waited for, then EBUSY', async () => {
    const path = join(tmp(), 'x.lock');
    const release = await acquireLock(path);
    const other = spawn(process.execPath, ['-e', 'setInterval(()=>{},1000)'], { stdio: 'ignore' });
    try {
      release();
      writeFileSync(path, `${other.pid}\n`);
      const t0 = Date.now();
      const err = await acquireLock(path, { waitMs: 200 }).catch((e) => e);
      expect(err).toBeInstanceOf(LockBusyError);
      expect((err as LockBusyError).pid).toBe(other.pid);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
      writeFileSync(path, '999999999\n'); // no such process
      const again = await acquireLock(path);
      expect(readFileSync(path, 'utf8').trim()).toBe(String(process.pid));
      again();
      again();
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe('listen', () => {
  it('names the address and the reason when the port is taken', async () => {
    const a = createServer();
    const bound = await listen(a, { host: '127.0.0.1', port: 0 }, 'HTTP');
    const err = await listen(createServer(), bound, 'HTTP').catch((e) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect(err.message).toBe(`cannot listen for HTTP on 127.0.0.1:${bound.port}: address already in use`);
    expect(err.code).toBe('VIGIL_ERR_LISTEN');
    expect(err.cause.code).toBe('EADDRINUSE');
    expect(err.exitCode).toBe(ExitCode.FAILURE);
    await closeServer(a);
  });
});

describe('errors and configuration files', () => {
  it('exit codes: the error’s own, 78 for configuration and usage, 0 for --help', () => {
    expect(cliExitCode(new ConfigError('x'))).toBe(78);
    const manual = defineErrors({ VIGIL_ERR_TEST_MANUAL: { message: 'a person must look', exitCode: 2 } });
    expect(cliExitCode(new VigilError(manual.VIGIL_ERR_TEST_MANUAL, 'x'))).toBe(2);
    expect(cliExitCode(new Error('x'))).toBe(1);
    expect(cliExitCode(Object.assign(new Error('help'), { code: 'commander.helpDisplayed', exitCode: 0 }))).toBe(0);
    expect(cliExitCode(Object.assign(new Error('bad'), { code: 'commander.unknownOption', exitCode: 1 }))).toBe(78);
  });

  it('readConfigFile names the file and the key', () => {
    const dir = tmp();
    const schema = strictObject({ port: z.number().int() });
    expect(() => readConfigFile(join(dir, 'none.json'), schema)).toThrow(
      `${join(dir, 'none.json')}: no such configuration file`,
    );
    writeFileSync(join(dir, 'bad.json'), '{');
    expect(() => readConfigFile(join(dir, 'bad.json'), schema)).toThrow(/bad\.json: not valid JSON/);
    writeFileSync(join(dir, 'c.json'), '{"port":"x"}');
    expect(() => readConfigFile(join(dir, 'c.json'), schema)).toThrow(
      `${join(dir, 'c.json')}: invalid configuration: port: expected a number, got "x"`,
    );
    writeFileSync(join(dir, 'ok.json'), '{"port":1}');
    expect(readConfigFile(join(dir, 'ok.json'), schema)).toEqual({ port: 1 });
  });
});

describe('listenersOn', () => {
  it('with a host, tells a listener on 127.0.0.1:PORT from one on 127.0.0.2:PORT', async () => {
    const a = createServer();
    const bound = await listen(a, { host: '127.0.0.2', port: 0 }, 'test');
    try {
      const { listenersOn } = await import('../src/node/index.js');
      expect(await listenersOn(bound.port)).toContain(process.pid);
      expect(await listenersOn(bound.port, '127.0.0.2')).toContain(process.pid);
      expect(await listenersOn(bound.port, '127.0.0.1')).not.toContain(process.pid);
    } finally {
      await closeServer(a);
    }
  });
});

/**
 * What the guardian runs, exactly: launchd and systemd argv (recording stand-ins on the PATH of
 * the spawned guardian), the integrity check (a real manifest, a missing binary, codesign), and
 * the alert through a real messaging daemon.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { sha256File } from '../src/integrity.js';
import { fixture } from './fixture.js';
import { baseConfig, exited, type FaultServer, guardian, NODE, nowS, standins, waitFor, writeJson } from './helpers.js';

const fx = fixture();
let server: FaultServer;
const uid = process.getuid?.() ?? 0;

beforeAll(async () => {
  server = await fx.scenario('fault').fault();
});

describe('launchd', () => {
  it('restarts with `launchctl kickstart -k gui/UID/LABEL`, stops with bootout, starts with bootstrap, and logs the rc', async () => {
    const sc = fx.scenario('launchd');
    const { env, calls } = standins(sc.dir, { launchctl: 3 });
    const primaryLog = join(sc.dir, 'inference.log');
    writeFileSync(primaryLog, '');
    const config = sc.config(server.port, {
      failuresBeforeRestart: 1,
      primary: {
        agent: undefined, // the label is the agent
        log: primaryLog,
        service: { kind: 'launchd', label: 'com.vigil.inference' },
        standalone: [NODE, '-e', ''],
      },
      fallback: {
        service: { kind: 'launchd', label: 'com.vigil.inference-fallback', plist: '/Library/LaunchAgents/fb.plist' },
      },
    });
    server.setMode('500');
    const t0 = nowS();
    expect((await guardian(['tick', '-c', config], env)).code).toBe(0);
    expect(calls()).toEqual([{ name: 'launchctl', argv: ['kickstart', '-k', `gui/${uid}/com.vigil.inference`] }]);
    expect(sc.events(t0).slice(1)).toEqual([
      { ts: expect.any(Number), level: 'warn', event: 'restarting', action: 'kickstart', agent: 'com.vigil.inference' },
      { ts: expect.any(Number), level: 'info', event: 'restart_requested', rc: 3 },
    ]);
    server.setMode('ok');

    appendFileSync(primaryLog, 'dyld: Library not loaded: libggml.dylib, library not found\n');
    expect((await guardian(['tick', '-c', config], { ...env, STANDIN_RC_LAUNCHCTL: '0' })).code).toBe(0);
    expect(calls().slice(1)).toEqual([
      { name: 'launchctl', argv: ['bootout', `gui/${uid}/com.vigil.inference`] },
      { name: 'launchctl', argv: ['bootstrap', `gui/${uid}`, '/Library/LaunchAgents/fb.plist'] },
    ]);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'fallback_activated' });

    expect((await guardian(['restore', '-c', config], { ...env, STANDIN_RC_LAUNCHCTL: '0' })).code).toBe(0);
    expect(calls().slice(3)).toEqual([
      { name: 'launchctl', argv: ['bootout', `gui/${uid}/com.vigil.inference-fallback`] },
      { name: 'launchctl', argv: ['kickstart', `gui/${uid}/com.vigil.inference`] },
      { name: 'launchctl', argv: ['kickstart', '-k', `gui/${uid}/com.vigil.inference`] },
    ]);
  });

  it('uses the configured domain (a system daemon)', async () => {
    const sc = fx.scenario('launchd-system');
    const { env, calls } = standins(sc.dir);
    const config = sc.config(server.port, {
      failuresBeforeRestart: 1,
      primary: { service: { kind: 'launchd', label: 'com.vigil.inference', domain: 'system' } },
    });
    server.setMode('empty');
    expect((await guardian(['tick', '-c', config], env)).code).toBe(0);
    server.setMode('ok');
    expect(calls()).toEqual([{ name: 'launchctl', argv: ['kickstart', '-k', 'system/com.vigil.inference'] }]);
  });
});

describe('systemd', () => {
  it.each([
    [true, ['--user', 'restart', 'vigil-inference.service']],
    [false, ['restart', 'vigil-inference.service']],
  ])('restarts with systemctl (user %s)', async (user, argv) => {
    const sc = fx.scenario(`systemd-${user}`);
    const { env, calls } = standins(sc.dir);
    const config = sc.config(server.port, {
      failuresBeforeRestart: 1,
      primary: { service: { kind: 'systemd', unit: 'vigil-inference.service', user } },
    });
    server.setMode('no_content');
    expect((await guardian(['tick', '-c', config], env)).code).toBe(0);
    server.setMode('ok');
    expect(calls()).toEqual([{ name: 'systemctl', argv }]);
    expect(sc.lines().at(-1)).toEqual({
      ts: expect.any(Number),
      level: 'info',
      event: 'restart_requested',
      rc: 0,
    });
  });

  it('stops and starts units for the fallback', async () => {
    const sc = fx.scenario('systemd-fallback');
    const { env, calls } = standins(sc.dir);
    const primaryLog = join(sc.dir, 'inference.log');
    writeFileSync(primaryLog, '');
    const config = sc.config(server.port, {
      primary: { log: primaryLog, service: { kind: 'systemd', unit: 'vigil-inference.service', user: true } },
      fallback: { service: { kind: 'systemd', unit: 'vigil-inference-fallback.service', user: true } },
    });
    expect((await guardian(['tick', '-c', config], env)).code).toBe(0);
    appendFileSync(primaryLog, `{"ts":${nowS()},"level":"error","msg":"Out of memory"}\n`);
    expect((await guardian(['tick', '-c', config], env)).code).toBe(0);
    expect(calls()).toEqual([
      { name: 'systemctl', argv: ['--user', 'stop', 'vigil-inference.service'] },
      { name: 'systemctl', argv: ['--user', 'start', 'vigil-inference-fallback.service'] },
    ]);
  });
});

describe('a command that hangs', () => {
  it('is killed at commandTimeoutS and reported with rc 124', async () => {
    const sc = fx.scenario('hung-command');
    const config = sc.config(server.port, {
      failuresBeforeRestart: 1,
      commandTimeoutS: 0.3,
      primary: { service: { kind: 'command', restart: [NODE, '-e', 'setTimeout(() => {}, 60000)'] } },
    });
    server.setMode('500');
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    server.setMode('ok');
    expect(sc.lines().at(-1)).toMatchObject({ event: 'restart_requested', rc: 124 });
  });
});

// ---- integrity and alerts ----------------------------------------------------------------------

const DAEMON = fileURLToPath(new URL('../../signal-daemon/bin/signal-daemon.js', import.meta.url));
const INFERENCE = fileURLToPath(new URL('../../inference-server/bin/inference-server.js', import.meta.url));

function spawnDaemon(args: string[]): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, [DAEMON, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const t = setTimeout(() => reject(new Error(`daemon did not start: ${out}`)), 15_000);
    child.stderr!.on('data', (s: Buffer) => {
      out += s;
    });
    child.stdout!.on('data', (s: Buffer) => {
      out += s;
      const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
      if (line) {
        clearTimeout(t);
        resolve({ child, port: Number((JSON.parse(line) as { http: string }).http.split(':').pop()) });
      }
    });
    child.on('exit', (code) => reject(new Error(`daemon exited with ${code}: ${out}`)));
  });
}

/** The first message event of a daemon's SSE stream, replayed from the start. */
function firstMessage(port: number): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = get(
      { host: '127.0.0.1', port, path: '/api/v1/events', headers: { 'last-event-id': '0' }, agent: false },
      (res) => {
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => {
          buf += s;
          const m = /^data:(.*)$/m.exec(buf);
          if (m) {
            req.destroy();
            resolve(JSON.parse(m[1]!));
          }
        });
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('no message')));
  });
}

describe('integrity', () => {
  it('verifies the binary against the manifest inference-server writes, and reports a mismatch at error level', async () => {
    const sc = fx.scenario('manifest');
    const binary = join(sc.dir, 'bin', 'inference-server');
    mkdirSync(join(sc.dir, 'bin'));
    writeFileSync(binary, '#!/bin/sh\necho inference-server 0.1.0\n', { mode: 0o755 });
    const manifest = join(sc.dir, 'manifest.json');
    const made = await new Promise<number | null>((resolve) => {
      const c = spawn(NODE, [INFERENCE, 'manifest', '--model', binary, '--out', manifest], { stdio: 'ignore' });
      c.on('exit', resolve);
    });
    expect(made).toBe(0);
    const config = sc.config(server.port, { primary: { binary, manifest } });
    const t0 = nowS();
    const ok = await guardian(['check-integrity', '-c', config]);
    expect(ok).toEqual({ code: 0, stdout: `ok: ${binary}: exists, sha256 matches the manifest\n`, stderr: '' });
    appendFileSync(binary, '# tampered\n');
    const bad = await guardian(['check-integrity', '-c', config]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      `guardian: integrity check failed: ${binary} has sha256 ${await sha256File(binary)}, the manifest ${manifest} says ${
        JSON.parse(readFileSync(manifest, 'utf8')).files[0].sha256
      }\n`,
    );
    expect(sc.events(t0)).toEqual([
      expect.objectContaining({ event: 'integrity_ok', level: 'info' }),
      expect.objectContaining({
        event: 'integrity_failed',
        level: 'error',
        detail: expect.stringContaining('has sha256'),
      }),
    ]);
    // sha256sum's format works too.
    writeFileSync(join(sc.dir, 'SHA256SUMS'), `${await sha256File(binary)}  inference-server\n`);
    const sums = writeJson(
      join(sc.dir, 'g2.json'),
      baseConfig(sc.dir, server.port, {
        stateFile: join(sc.dir, 's2.json'),
        primary: { binary, manifest: join(sc.dir, 'SHA256SUMS') },
      }),
    );
    expect((await guardian(['check-integrity', '-c', sums])).code).toBe(0);
  });

  it('runs codesign --verify --strict where configured', async () => {
    const sc = fx.scenario('codesign');
    const { env, calls } = standins(sc.dir, { codesign: 1 });
    const binary = join(sc.dir, 'inference-server');
    writeFileSync(binary, 'x');
    const config = sc.config(server.port, { primary: { binary, codesign: true } });
    const r = await guardian(['check-integrity', '-c', config], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(`guardian: integrity check failed: codesign --verify failed for ${binary} (rc 1)\n`);
    expect(calls()).toEqual([{ name: 'codesign', argv: ['--verify', '--strict', binary] }]);
    expect((await guardian(['check-integrity', '-c', config], { ...env, STANDIN_RC_CODESIGN: '0' })).stdout).toBe(
      `ok: ${binary}: exists, codesign verified\n`,
    );
  });

  it('reports a missing binary as binary_missing at error level every 5 min, and alerts once through the messaging daemon', async () => {
    const sc = fx.scenario('missing');
    const localnet = join(sc.dir, 'localnet.sqlite');
    const common = ['--http', '127.0.0.1:0', '--tcp', 'off', '--localnet', localnet];
    const a = await spawnDaemon(['--account', '+15550000001', '--data-dir', join(sc.dir, 'a'), ...common]);
    const b = await spawnDaemon(['--account', '+15550000002', '--data-dir', join(sc.dir, 'b'), ...common]);
    try {
      const binary = join(sc.dir, 'inference-server');
      const config = sc.config(server.port, {
        integrityIntervalS: 300,
        primary: { binary },
        alert: { rpc: `127.0.0.1:${a.port}`, recipient: ['+15550000002'] },
      });
      const t0 = nowS();
      expect((await guardian(['tick', '-c', config])).code).toBe(0);
      const events = sc.events(t0);
      expect(events).toEqual([
        { ts: expect.any(Number), level: 'error', event: 'binary_missing' },
        { ts: expect.any(Number), level: 'info', event: 'alert_sent', detail: 'sent to +15550000002' },
        expect.objectContaining({ event: 'probe_ok' }),
      ]);
      const message = await firstMessage(b.port);
      expect(message.envelope.sourceNumber).toBe('+15550000001');
      expect(message.envelope.dataMessage.message).toMatch(
        new RegExp(`^\\[vigil guardian on .+\\] binary missing: ${binary} does not exist$`),
      );
      // Still missing at the next check: logged again, not alerted again.
      const cli = await guardian(['check-integrity', '-c', config]);
      expect(cli).toEqual({ code: 2, stdout: '', stderr: `guardian: binary missing: ${binary} does not exist\n` });
      expect(sc.lines().map((e) => e.event)).toEqual(['binary_missing', 'alert_sent', 'probe_ok', 'binary_missing']);
      writeFileSync(binary, 'back');
      expect((await guardian(['check-integrity', '-c', config])).code).toBe(0);
      rmSync(binary);
    } finally {
      a.child.kill('SIGTERM');
      b.child.kill('SIGTERM');
      await Promise.all([exited(a.child), exited(b.child)]);
    }
  });
});

describe('the alert', () => {
  it('is logged as failed, and changes nothing else, when the daemon answers with an error', async () => {
    const sc = fx.scenario('alert-error');
    const localnet = join(sc.dir, 'localnet.sqlite');
    const a = await spawnDaemon([
      '--account',
      '+15550000001',
      '--data-dir',
      join(sc.dir, 'a'),
      '--http',
      '127.0.0.1:0',
      '--tcp',
      'off',
      '--localnet',
      localnet,
    ]);
    try {
      const config = sc.config(server.port, {
        integrityIntervalS: 300,
        primary: { binary: join(sc.dir, 'gone') },
        alert: { rpc: `127.0.0.1:${a.port}`, recipient: ['+15559999999'] },
      });
      expect((await guardian(['tick', '-c', config])).code).toBe(0);
      const events = sc.lines();
      expect(events.map((e) => e.event)).toEqual(['binary_missing', 'alert_failed', 'probe_ok']);
      expect(events[1]!.detail).toMatch(/send to \+15559999999 failed: -1 /);
    } finally {
      a.child.kill('SIGTERM');
      await exited(a.child);
    }
    await waitFor('daemon gone', () => a.child.exitCode !== null || a.child.signalCode !== null);
  });
});

/**
 * Fatal patterns and the fallback, with real processes: a primary and a fallback (fault servers
 * run by a small supervisor through the `command` manager), fatal lines appended to the
 * primary's real log, the lock file, probes and restarts that follow the lock, the operator's
 * restore.
 */
import { appendFileSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { fixture, startService } from './fixture.js';
import { exited, freePort, guardian, NODE, nowS, readLines, spawnGuardian, waitFor } from './helpers.js';

const fx = fixture();
const running = (dir: string, name: string) => existsSync(join(dir, `${name}.pid`));

describe('fallback', () => {
  it('falls back on a fatal pattern, keeps to the fallback while the lock exists, and swaps back on restore', async () => {
    const sc = fx.scenario('swap');
    const [pPort, fPort] = [await freePort(), await freePort()];
    const primaryLog = join(sc.dir, 'primary.log');
    const fixed = join(sc.dir, 'primary-fixed');
    const primary = sc.faultService('primary', pPort, ['--log', primaryLog]);
    const fallback = sc.faultService('fallback', fPort);
    await startService(primary);
    const alertPort = await freePort(); // nothing listens: the alert fails, and that changes nothing
    const config = sc.config(pPort, {
      primary: {
        log: primaryLog,
        service: primary,
        standalone: [NODE, '-e', `process.exit(require('node:fs').existsSync(${JSON.stringify(fixed)}) ? 0 : 1)`],
      },
      fallback: { agent: 'inference-fallback', http: `127.0.0.1:${fPort}`, service: fallback },
      alert: { rpc: `127.0.0.1:${alertPort}`, recipient: ['+15550000009'], timeoutS: 1 },
    });
    const t0 = nowS();
    const g = spawnGuardian(['run', '-c', config]);
    try {
      await sc.waitEvent('probe_ok');
      const line = `{"ts":${nowS()},"level":"error","msg":"llama.cpp","text":"ggml_metal_init: error: Failed to load the default metallib"}`;
      appendFileSync(primaryLog, `${line}\n`);
      await sc.waitEvent('alert_failed');

      // The lock file says what, when and the matching line.
      const lock = JSON.parse(readFileSync(join(sc.dir, 'fallback.lock'), 'utf8'));
      expect(lock).toMatchObject({
        what: expect.stringContaining('Failed to load the default metallib'),
        pattern: 'Failed to load the default metallib',
        line,
        primary: 'inference-primary',
        fallback: 'inference-fallback',
        since_iso: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(lock.since).toBeGreaterThanOrEqual(t0);
      // Primary stopped, fallback started, then the event; the failed alert is logged, never fatal.
      expect(sc.calls('primary')).toEqual(['start', 'stop']);
      expect(sc.calls('fallback')).toEqual(['start']);
      expect(running(sc.dir, 'primary')).toBe(false);
      expect(running(sc.dir, 'fallback')).toBe(true);
      const events = sc.events(t0);
      const at = events.findIndex((e) => e.event === 'fallback_activated');
      expect(events[at]).toEqual({ ts: expect.any(Number), level: 'warn', event: 'fallback_activated' });
      expect(events[at + 1]).toMatchObject({
        event: 'alert_failed',
        detail: expect.stringContaining(`127.0.0.1:${alertPort}/api/v1/rpc`),
      });

      // Probes now go to the fallback, under its label.
      const okBefore = events.filter((e) => e.event === 'probe_ok').length;
      const after = await sc.waitEvent('probe_ok', okBefore + 2);
      expect(after.filter((e) => e.event === 'probe_ok').at(-1)).toMatchObject({ agent: 'inference-fallback' });
      expect(readLines(join(sc.dir, 'fallback.requests')).some((r) => r.path === '/v1/chat/completions')).toBe(true);

      // Never a fallback from the fallback: another fatal line changes nothing.
      appendFileSync(primaryLog, 'Segmentation fault (core dumped)\n');
      const n = sc.lines().filter((e) => e.event === 'probe_ok').length;
      await sc.waitEvent('probe_ok', n + 3);
      expect(sc.lines().filter((e) => e.event === 'fallback_activated')).toHaveLength(1);
      expect(sc.calls('fallback')).toEqual(['start']);

      // Restarts go to the fallback too.
      writeFileSync(join(sc.dir, 'fallback.mode'), '500');
      await sc.waitEvent('restart_requested');
      expect(sc.lines().find((e) => e.event === 'restarting')).toMatchObject({
        action: 'kickstart',
        agent: 'inference-fallback',
      });
      expect(sc.calls('fallback')).toEqual(['start', 'restart']);
      expect(sc.calls('primary')).toEqual(['start', 'stop']);
      writeFileSync(join(sc.dir, 'fallback.mode'), 'ok');
      g.kill('SIGTERM');
      expect(await exited(g)).toEqual({ code: 0, signal: null });
    } finally {
      g.kill('SIGKILL');
    }

    // The swap-back is refused while the primary does not run standalone.
    const refused = await guardian(['restore', '-c', config]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(
      /^guardian: restore refused: the primary does not run standalone: .* exited with 1\n$/,
    );
    expect(existsSync(join(sc.dir, 'fallback.lock'))).toBe(true);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'restore_refused', level: 'warn' });
    expect(sc.calls('fallback')).toEqual(['start', 'restart']);

    // Fixed: the fallback stops, the lock goes, the primary is started and restarted.
    writeFileSync(fixed, '');
    const t1 = nowS();
    const restored = await guardian(['restore', '-c', config]);
    expect(restored).toMatchObject({ code: 0, stderr: '' });
    expect(restored.stdout).toBe(
      'restored: inference-primary is the active backend again, fallback stopped, lock file removed\n',
    );
    expect(existsSync(join(sc.dir, 'fallback.lock'))).toBe(false);
    expect(sc.calls('fallback')).toEqual(['start', 'restart', 'stop']);
    expect(sc.calls('primary')).toEqual(['start', 'stop', 'start', 'restart']);
    expect(running(sc.dir, 'primary')).toBe(true);
    expect(running(sc.dir, 'fallback')).toBe(false);
    expect(sc.events(t0).filter((e) => e.ts >= t1)).toEqual([
      { ts: expect.any(Number), level: 'info', event: 'restored', agent: 'inference-primary' },
    ]);

    // The primary's old fatal lines are history: the next tick probes the primary.
    const tick = await guardian(['tick', '-c', config]);
    expect(tick.code).toBe(0);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'probe_ok', agent: 'inference-primary' });
    expect((await guardian(['status', '-c', config])).stdout).toMatch(
      /^mode: primary \(inference-primary\)\nstate: serving\n/,
    );
  });

  it('acts only on what the primary log said recently when it reads it for the first time, and follows its rotation', async () => {
    const sc = fx.scenario('recent');
    const s = await sc.fault();
    const primaryLog = join(sc.dir, 'inference.log');
    writeFileSync(
      primaryLog,
      `{"ts":${nowS() - 3600},"level":"error","msg":"cannot listen: address already in use"}\n`,
    );
    const config = sc.config(s.port, {
      primary: { log: primaryLog },
      fallback: {
        service: { kind: 'command', restart: [NODE, '-e', ''], stop: [NODE, '-e', ''], start: [NODE, '-e', ''] },
      },
    });
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok']);
    // Rotated: the old file moves aside, the new one says the server crashed (no timestamp).
    renameSync(primaryLog, `${primaryLog}.1`);
    writeFileSync(primaryLog, 'Segmentation fault (core dumped)\n');
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    // The primary has no stop command here: said, and the fallback is activated all the same.
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok', 'service_failed', 'fallback_activated']);
    expect(sc.lines()[1]).toMatchObject({
      action: 'stop',
      agent: 'inference-primary',
      rc: 127,
      detail: 'no stop command is configured for the primary backend',
    });
    expect(JSON.parse(readFileSync(join(sc.dir, 'fallback.lock'), 'utf8'))).toMatchObject({
      pattern: 'Segmentation fault',
      line: 'Segmentation fault (core dumped)',
      fallback: 'fallback',
    });
    // A later guardian sees the lock and probes the fallback (here at the primary's address).
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect(sc.lines().at(-1)).toMatchObject({ event: 'probe_ok', agent: 'fallback' });
    const status = await guardian(['status', '-c', config]);
    expect(status.stdout).toMatch(
      /^mode: fallback \(fallback\) since \S+, after "Segmentation fault" in the primary's log\n/,
    );
    rmSync(join(sc.dir, 'fallback.lock'));
  });

  it('asks for a person (exit 2) on a fatal pattern when no fallback is configured', async () => {
    const sc = fx.scenario('nofallback');
    const s = await sc.fault();
    const primaryLog = join(sc.dir, 'inference.log');
    writeFileSync(primaryLog, '');
    const config = sc.config(s.port, { primary: { log: primaryLog } });
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    appendFileSync(primaryLog, 'inference-server: manifest verification failed: tiny.gguf has sha256 00\n');
    const t0 = nowS();
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'manual intervention required (fallback_unavailable: fatal pattern "manifest verification failed"',
    );
    expect(sc.events(t0)).toEqual([expect.objectContaining({ event: 'fallback_unavailable', level: 'error' })]);
    expect(existsSync(join(sc.dir, 'fallback.lock'))).toBe(false);
    await waitFor('no probe after the fatal line', () => s.received().length === 1);
  });
});

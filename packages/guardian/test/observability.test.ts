/**
 * What tells a person, with real processes: the metrics textfile (checked by the format reader
 * and promtool), the dead-man's-switch pings and the webhook alert of a guardian that hits its
 * rate limit, all against a local HTTP server standing for healthchecks.io and the webhook.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { checkMetrics, metricValue } from '../../shared-types/test/promcheck.js';
import { fixture } from './fixture.js';
import { exited, freePort, guardian, NODE, SERVICE, spawnGuardian } from './helpers.js';

const fx = fixture();
let hook: Server | null = null;
fx.onCleanup(async () => {
  hook?.closeAllConnections();
  await new Promise((r) => (hook ? hook.close(r) : r(null)));
});

interface Seen {
  method: string;
  url: string;
  body: string;
  headers: Record<string, unknown>;
}

/** A local server that records every request (the ping service and the webhook). */
async function recorder(): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, body, headers: req.headers });
      res.end('OK');
    });
  });
  await new Promise<void>((r) => hook!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}`, seen };
}

describe('metrics, pings and webhook alerts', () => {
  it('counts real probes in the textfile, pings each tick, and sends one webhook alert at the rate limit', async () => {
    const sc = fx.scenario('metrics');
    const s = await sc.fault();
    const { url, seen } = await recorder();
    const deadDaemon = await freePort(); // the message channel is broken: the webhook still gets through
    const metricsFile = join(sc.dir, 'textfile', 'vigil_guardian.prom');
    const record = [NODE, SERVICE, 'restart', '--dir', sc.dir, '--name', 'primary', '--rc', '0'];
    const config = sc.config(s.port, {
      intervalS: 0.05,
      metricsFile,
      ping: `${url}/ping/abc`,
      pingTimeoutS: 2,
      alert: {
        rpc: `127.0.0.1:${deadDaemon}`,
        recipient: ['+15550000009'],
        timeoutS: 1,
        webhook: { url: `${url}/hook`, headers: { Authorization: 'Bearer s3cret' }, timeoutS: 2 },
      },
      primary: { service: { kind: 'command', restart: record } },
    });

    // Two healthy ticks: the counters move with the real probes.
    s.setMode('ok');
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    expect((await guardian(['tick', '-c', config])).code).toBe(0);
    let text = readFileSync(metricsFile, 'utf8');
    checkMetrics(text);
    expect(metricValue(text, 'vigil_guardian_probes_total', { probe: 'chat', outcome: 'ok' })).toBe(2);
    expect(metricValue(text, 'vigil_guardian_probes_total', { probe: 'chat', outcome: 'fail' })).toBe(0);
    expect(metricValue(text, 'vigil_guardian_alerting')).toBe(0);
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /ping/abc/start',
      'GET /ping/abc',
      'GET /ping/abc/start',
      'GET /ping/abc',
    ]);

    // The server fails: restarts until the rate limit, exit 2.
    seen.length = 0;
    s.setMode('500');
    const g = spawnGuardian(['run', '-c', config]);
    expect(await exited(g)).toEqual({ code: 2, signal: null });
    const log = sc.lines();
    const fails = log.filter((e) => e.event === 'probe_fail').length;
    const hooks = seen.filter((r) => r.url === '/hook');
    expect(hooks).toHaveLength(1);
    expect(hooks[0]!.method).toBe('POST');
    expect(hooks[0]!.headers.authorization).toBe('Bearer s3cret');
    expect(hooks[0]!.headers['content-type']).toBe('application/json');
    const alert = JSON.parse(hooks[0]!.body);
    expect(alert).toMatchObject({
      source: 'vigil',
      service: 'guardian',
      event: 'rate_limit',
      detail: expect.stringContaining('restart rate limit reached: 3 restarts of inference-primary'),
      output: { probe: 'chat', target: 'primary', ok: false, cause: 'http_error', snippet: expect.any(String) },
      text: expect.stringContaining('rate_limit'),
    });
    // Both channels were tried: the message through the (dead) daemon failed, the webhook got through.
    const outcomes = log.filter((e) => e.event === 'alert_sent' || e.event === 'alert_failed');
    expect(outcomes.map((e) => e.event).sort()).toEqual(['alert_failed', 'alert_sent']);
    expect(outcomes.find((e) => e.event === 'alert_sent')!.detail).toBe(`webhook ${url}/hook: HTTP 200`);
    // Each tick pinged start, then its exit: 0 while it healed, 2 at the end.
    const pings = seen.filter((r) => r.url.startsWith('/ping/')).map((r) => r.url);
    expect(pings.length % 2).toBe(0);
    expect(pings.filter((_, i) => i % 2 === 0).every((p) => p === '/ping/abc/start')).toBe(true);
    expect(pings.at(-1)).toBe('/ping/abc/2');
    expect(
      pings
        .slice(1, -1)
        .filter((p) => p !== '/ping/abc/start')
        .every((p) => p === '/ping/abc'),
    ).toBe(true);

    text = readFileSync(metricsFile, 'utf8');
    checkMetrics(text);
    expect(metricValue(text, 'vigil_guardian_probes_total', { probe: 'chat', outcome: 'fail' })).toBe(fails);
    expect(metricValue(text, 'vigil_guardian_probes_total', { probe: 'chat', outcome: 'ok' })).toBe(2);
    expect(metricValue(text, 'vigil_guardian_restarts_total')).toBe(3);
    expect(metricValue(text, 'vigil_guardian_alerting')).toBe(1);
    expect(metricValue(text, 'vigil_guardian_alerting_info', { reason: 'rate_limit' })).toBe(1);
    expect(metricValue(text, 'vigil_guardian_alerts_total', { channel: 'webhook', outcome: 'sent' })).toBe(1);
    expect(metricValue(text, 'vigil_guardian_alerts_total', { channel: 'message', outcome: 'failed' })).toBe(1);
    expect(metricValue(text, 'vigil_guardian_events_total', { event: 'rate_limit' })).toBe(1);

    // Still alerting: the next tick exits 2, pings /2, and does not alert again (once per episode).
    seen.length = 0;
    expect((await guardian(['tick', '-c', config])).code).toBe(2);
    expect(seen.map((r) => r.url)).toEqual(['/ping/abc/start', '/ping/abc/2']);
  });

  it('a ping that cannot be delivered is one line on stderr and changes nothing else', async () => {
    const sc = fx.scenario('noping');
    const s = await sc.fault();
    s.setMode('ok');
    const dead = await freePort();
    const config = sc.config(s.port, { ping: `http://127.0.0.1:${dead}/p`, pingTimeoutS: 1 });
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      new RegExp(`^guardian: ping start to http://127\\.0\\.0\\.1:${dead}/p failed: .*ECONNREFUSED`, 'm'),
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1); // the second ping of the tick is the same episode
    expect(sc.lines().map((e) => e.event)).toEqual(['probe_ok']);
  });
});

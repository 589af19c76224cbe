/**
 * The status page over a week of history (60,480 guardian events at 10 s ticks, 2,000 health
 * runs): the whole page (assets included) weighs under 300 KB because history is summarised on the
 * server; the hour's bar has one mark per probe of the hour; what the logs gain is read
 * incrementally (an appended probe shows up; a replaced log is read again from its start); the
 * token file is private. The first-HTML time is measured here and reported; its goal is a
 * benchmark's (`pnpm bench status-page`).
 */
import { appendFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { homePaths } from '../src/paths.js';
import { Collector } from '../src/status-page/collect.js';
import { writeSampleHistory } from '../src/status-page/sample.js';
import { type StatusPage, startStatusPage } from '../src/status-page/server.js';

const home = tmpDir('vigil-history-');
const paths = homePaths(home.dir);
const NOW = Date.now() / 1000;
/** What the page reads: the sample's home and configurations. */
const readConfig = {
  home: home.dir,
  socket: paths.socket,
  restartWith: 'supervisor' as const,
  guardianConfig: paths.guardianConfig,
  healthConfig: paths.healthConfig,
  daemonMetrics: null,
  askTimeoutMs: 800,
};
let page: StatusPage;
let sample: ReturnType<typeof writeSampleHistory>;

const get = async (path: string) => {
  const res = await fetch(`${page.url}${path.replace(/^\//, '')}`);
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
};
const hourMarks = (html: string) =>
  (/<svg[^>]*id="hour-bar">(.*?)<\/svg>/.exec(html)?.[1] ?? '').match(/<rect /g)?.length ?? 0;

describe('the status page over a week of history', () => {
  beforeAll(async () => {
    sample = writeSampleHistory(home.dir, {
      days: 7,
      tickS: 10,
      healthRuns: 2000,
      now: NOW,
      closedPort: await freePort(),
    });
    page = await startStatusPage({
      ...readConfig,
      listen: { host: '127.0.0.1', port: 0 },
      tokenFile: paths.statusToken,
      actionsLog: paths.log('status-page-actions'),
      addressFile: paths.statusAddress,
      log: () => {},
    });
  }, 60_000);

  afterAll(async () => {
    await page?.close();
    home.cleanup();
  });

  it('weighs under 300 KB with its assets, and shows one mark per probe of the last hour', async () => {
    expect(sample.events).toBeGreaterThanOrEqual(60_000);
    const t0 = performance.now();
    const html = await get('/');
    const first = performance.now() - t0;
    const t1 = performance.now();
    await get('/');
    const again = performance.now() - t1;
    process.stdout.write(
      `status page, ${sample.events} guardian events and ${sample.healthRuns} health runs: first HTML ${first.toFixed(0)} ms (logs read), then ${again.toFixed(0)} ms\n`,
    );
    expect(html.status).toBe(200);
    const css = await get('/assets/page.css');
    const js = await get('/assets/page.js');
    expect([css.status, js.status]).toEqual([200, 200]);
    const weight = [html, css, js].reduce((n, r) => n + Buffer.byteLength(r.body), 0);
    process.stdout.write(
      `status page weight: ${(weight / 1024).toFixed(1)} KB (HTML ${(Buffer.byteLength(html.body) / 1024).toFixed(1)} KB)\n`,
    );
    expect(weight).toBeLessThan(300 * 1024);
    // Nothing else is loaded: every src and href is the page's own.
    expect(
      [...html.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((u) => /^(https?:)?\/\//.test(u!)),
    ).toEqual([]);
    // 360 probes an hour at 10 s ticks, each its own mark (the last tick may fall either side of now).
    expect(hourMarks(html.body)).toBeGreaterThanOrEqual(359);
    expect(hourMarks(html.body)).toBeLessThanOrEqual(361);
    expect(html.body).toContain(`${sample.healthRuns} runs logged`);
    expect(html.body).toMatch(/restart: solid line/);
    // The latency chart marks the restarts of the last 24 h (one every 997 probes).
    expect((html.body.match(/<line class="mark restart"/g) ?? []).length).toBeGreaterThanOrEqual(8);
    // No supervisor in this home: said, not hidden.
    expect(html.body).toContain('No supervisor answers');
  }, 60_000);

  it('reads what the guardian log gains, and a replaced log from its start', async () => {
    const before = hourMarks((await get('/')).body);
    const ts = Date.now() / 1000;
    appendFileSync(
      paths.log('guardian'),
      `${JSON.stringify({ ts, level: 'warn', event: 'probe_fail', probe_ms: 20000, consecutive: 1, snippet: 'x' })}\n`,
    );
    await new Promise((r) => setTimeout(r, 300)); // older than the 250 ms a page may reuse
    const after = (await get('/')).body;
    expect(hourMarks(after)).toBe(before + 1);
    expect(after).toMatch(/<rect class="probe failed"[^>]*><title>[^<]* failed 20000 ms<\/title>/);
    // Rotation: a new file under the same name holds one probe.
    renameSync(paths.log('guardian'), `${paths.log('guardian')}.1`);
    writeFileSync(
      paths.log('guardian'),
      `${JSON.stringify({ ts, level: 'info', event: 'probe_ok', probe_ms: 5, agent: 'inference-server' })}\n`,
    );
    await new Promise((r) => setTimeout(r, 300));
    const rotated = await get('/api/status');
    expect(JSON.parse(rotated.body).guardian).toMatchObject({ probesLastHour: 1, events: { probe_ok: 1 } });
  }, 30_000);

  it('asks the daemon at --daemon when given, else at daemon.http of the health configuration', async () => {
    // The daemon of the compose stack: a real HTTP listener that the health configuration does not name.
    const answer = { backend: 'localnet', state: 'ok', account: '+15550000001' };
    const daemon = createServer((req, res) => {
      res.writeHead(req.url === '/api/v1/check' ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
    await new Promise<void>((r) => daemon.listen(0, '127.0.0.1', r));
    const port = (daemon.address() as AddressInfo).port;
    try {
      const given = await new Collector({ ...readConfig, daemon: { host: '127.0.0.1', port } }).snapshot();
      expect(given.messaging.check).toEqual(answer);
      // The sample's health configuration names a closed port.
      const fromHealth = await new Collector(readConfig).snapshot();
      expect(fromHealth.messaging.check).toBeNull();
    } finally {
      await new Promise((r) => daemon.close(r));
    }
  });

  it('keeps its token private and publishes its address while it runs', () => {
    expect(statSync(paths.statusToken).mode & 0o077).toBe(0);
    expect(statSync(paths.statusAddress).isFile()).toBe(true);
  });
});

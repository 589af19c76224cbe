/**
 * `--metrics`: Prometheus text on a listener of its own, checked by the format reader and
 * promtool, with counters that move with real traffic between two daemons on one local network.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { HostPort } from '@vigil/shared-types';
import { freePort } from '../../../test/support.js';
import { checkMetrics, metricValue } from '../../shared-types/test/promcheck.js';
import { exited, http, rpc, SseClient, spawnDaemon, startDaemon, TcpClient, tmpDir } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const tmp = tmpDir();
let a: Awaited<ReturnType<typeof startDaemon>>;
let b: Awaited<ReturnType<typeof startDaemon>>;

beforeAll(async () => {
  a = await startDaemon(tmp.dir, A, { metrics: { host: '127.0.0.1', port: 0 } });
  b = await startDaemon(tmp.dir, B);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  tmp.cleanup();
});

async function scrape(addr: HostPort): Promise<string> {
  const r = await http(addr, { method: 'GET', path: '/metrics', headers: {} });
  expect(r.status).toBe(200);
  expect(r.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  checkMetrics(r.text);
  return r.text;
}

describe('the metrics listener', () => {
  it('counts calls, sends, receipts, consumers and replays as real traffic happens', async () => {
    const m = a.metrics!;
    let text = await scrape(m);
    expect(metricValue(text, 'vigil_daemon_messages_received_total')).toBe(0);
    expect(metricValue(text, 'vigil_daemon_consumers', { transport: 'sse' })).toBe(0);
    expect(metricValue(text, 'vigil_daemon_backend_up')).toBe(1);
    expect(metricValue(text, 'vigil_daemon_backend_state', { kind: 'local', state: 'serving' })).toBe(1);
    expect(metricValue(text, 'vigil_daemon_last_inbound_timestamp_seconds')).toBeUndefined();

    const sse = await SseClient.open(a.http!);
    const tcp = await TcpClient.connect(a.tcp!);
    expect((await tcp.call('version')).result.version).toEqual(expect.any(String));
    for (const message of ['one', 'two']) {
      expect((await rpc(b.http!, 'send', { recipient: [A], message })).result.results[0].type).toBe('SUCCESS');
    }
    await sse.waitFor(2);
    expect((await rpc(a.http!, 'send', { recipient: [B], message: 'back' })).result).toBeDefined();
    expect((await rpc(a.http!, 'send', { recipient: [B], message: 'x', attachments: 42 })).error.code).toBe(-32602);
    expect((await rpc(a.http!, 'noSuchMethod')).error.code).toBe(-32601);
    expect((await rpc(a.http!, 'noSuchMethod2')).error.code).toBe(-32601);

    text = await scrape(m);
    expect(metricValue(text, 'vigil_daemon_messages_received_total')).toBe(2);
    expect(metricValue(text, 'vigil_daemon_messages_sent_total', { method: 'send' })).toBe(1);
    expect(
      metricValue(text, 'vigil_daemon_rpc_calls_total', { method: 'send', transport: 'http', outcome: 'ok' }),
    ).toBe(1);
    expect(
      metricValue(text, 'vigil_daemon_rpc_calls_total', {
        method: 'send',
        transport: 'http',
        outcome: 'invalid_params',
      }),
    ).toBe(1);
    // A method name a client makes up is not a label of its own.
    expect(
      metricValue(text, 'vigil_daemon_rpc_calls_total', {
        method: 'unknown',
        transport: 'http',
        outcome: 'method_not_found',
      }),
    ).toBe(2);
    expect(text).not.toContain('noSuchMethod');
    expect(
      metricValue(text, 'vigil_daemon_rpc_calls_total', { method: 'version', transport: 'tcp', outcome: 'ok' }),
    ).toBe(1);
    expect(metricValue(text, 'vigil_daemon_consumers', { transport: 'sse' })).toBe(1);
    expect(metricValue(text, 'vigil_daemon_consumers', { transport: 'tcp' })).toBe(1);
    expect(metricValue(text, 'vigil_daemon_inbox_messages')).toBe(2);
    const inbound = metricValue(text, 'vigil_daemon_last_inbound_timestamp_seconds')!;
    expect(Math.abs(inbound - Date.now() / 1000)).toBeLessThan(60);
    expect(metricValue(text, 'vigil_daemon_last_outbound_timestamp_seconds')).toBeGreaterThanOrEqual(inbound - 1);

    // A consumer that comes back with its Last-Event-ID after missing one message: a replay.
    const last = sse.events.at(-1)!.id!;
    sse.close();
    tcp.close();
    expect((await rpc(b.http!, 'send', { recipient: [A], message: 'three' })).result).toBeDefined();
    const again = await SseClient.open(a.http!, last);
    await again.waitFor(1);
    again.close();
    text = await scrape(m);
    expect(metricValue(text, 'vigil_daemon_sse_replays_total')).toBe(1);
    expect(metricValue(text, 'vigil_daemon_sse_replayed_messages_total')).toBe(1);
    expect(metricValue(text, 'vigil_daemon_messages_received_total')).toBe(3);
  });

  it('gauges the messages held for each consumer: those that arrived since its last read, until it takes them', async () => {
    const C = '+15550000006';
    const c = await startDaemon(tmp.dir, C, { metrics: { host: '127.0.0.1', port: 0 }, hold: true });
    try {
      expect(metricValue(await scrape(c.metrics!), 'vigil_daemon_held_messages', { consumer: 'sse' })).toBe(0);
      for (const message of ['held one', 'held two']) {
        expect((await rpc(b.http!, 'send', { recipient: [C], message })).result.results[0].type).toBe('SUCCESS');
      }
      let text = await scrape(c.metrics!);
      for (let i = 0; i < 100 && metricValue(text, 'vigil_daemon_inbox_messages') !== 2; i += 1) {
        await new Promise((r) => setTimeout(r, 50));
        text = await scrape(c.metrics!);
      }
      expect(metricValue(text, 'vigil_daemon_held_messages', { consumer: 'sse' })).toBe(2);
      expect(metricValue(text, 'vigil_daemon_held_oldest_age_seconds', { consumer: 'sse' })).toBeGreaterThanOrEqual(0);
      expect(metricValue(text, 'vigil_daemon_consumer_connections', { consumer: 'sse' })).toBe(0);
      // The next consumer takes them: none held any more.
      const sse = await SseClient.open(c.http!);
      await sse.waitFor(2);
      text = await scrape(c.metrics!);
      expect(metricValue(text, 'vigil_daemon_held_messages', { consumer: 'sse' })).toBe(0);
      expect(metricValue(text, 'vigil_daemon_held_oldest_age_seconds', { consumer: 'sse' })).toBeUndefined();
      expect(metricValue(text, 'vigil_daemon_consumer_connections', { consumer: 'sse' })).toBe(1);
      sse.close();
      // The gauge of a daemon that holds nothing stays 0 whatever arrives.
      expect(metricValue(await scrape(a.metrics!), 'vigil_daemon_held_messages', { consumer: 'sse' })).toBe(0);
    } finally {
      await c.close();
    }
  });

  it('answers only /metrics; the JSON-RPC listener keeps 404 for it', async () => {
    const m = a.metrics!;
    expect((await http(m, { method: 'GET', path: '/api/v1/check', headers: {} })).status).toBe(404);
    const post = await http(m, { method: 'POST', path: '/metrics', headers: {} });
    expect(post.status).toBe(405);
    expect(post.headers.allow).toBe('GET, HEAD');
    expect((await http(m, { method: 'GET', path: '/metrics', headers: { host: 'evil.example:80' } })).status).toBe(421);
    expect((await http(a.http!, { method: 'GET', path: '/metrics', headers: {} })).status).toBe(404);
    expect(b.metrics).toBeNull();
  });

  it('the binary: --metrics listens where told, and nothing listens without it', async () => {
    /** Runs a daemon process of its own account with `extra` flags, then stops it. */
    const withDaemon = async (n: string, extra: string[], check: (output: string) => Promise<void>) => {
      const d = await spawnDaemon([
        ...['--account', `+1555000000${n}`, '--http', '127.0.0.1:0', '--tcp', 'off', ...extra],
        ...['--localnet', `${tmp.dir}/localnet.sqlite`, '--data-dir', `${tmp.dir}/${n}`],
      ]);
      try {
        await check(d.output());
      } finally {
        d.child.kill('SIGTERM');
        await exited(d.child);
      }
    };
    const port = await freePort();
    await withDaemon('3', ['--metrics', `127.0.0.1:${port}`], async (output) => {
      expect(output).toContain(`"metrics":"127.0.0.1:${port}"`);
      expect(metricValue(await scrape({ host: '127.0.0.1', port }), 'vigil_daemon_backend_up')).toBe(1);
    });
    await withDaemon('4', [], async (output) => {
      expect(output).toContain('"metrics":"off"');
    });
    const refused = await spawnDaemon([
      '--account',
      '+15550000005',
      '--metrics',
      '0.0.0.0:0',
      '--localnet',
      `${tmp.dir}/localnet.sqlite`,
    ]).catch((e: Error) => e.message);
    expect(refused).toMatch(/refusing to listen for metrics on non-loopback address 0\.0\.0\.0/);
  });
});

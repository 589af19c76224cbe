import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  guardianConfigSchema,
  healthConfigSchema,
  LabelledCounter,
  pingUrl,
  renderMetrics,
  validateConfig,
  webhookAlert,
} from '../src/index.js';
import { httpRequest, postJson, sendPing } from '../src/node/index.js';
import { checkMetrics, metricValue, PROMTOOL, parseExposition } from './promcheck.js';

describe('the Prometheus writer', () => {
  const text = renderMetrics([
    {
      name: 'vigil_test_calls_total',
      help: 'Calls, by method.\nA second line with a \\ backslash.',
      type: 'counter',
      samples: [
        { labels: { method: 'send', outcome: 'ok' }, value: 3 },
        { labels: { method: 'we"ird\\name\n', outcome: 'error' }, value: 1 },
      ],
    },
    { name: 'vigil_test_up', help: 'Up.', type: 'gauge', samples: [{ value: 1 }] },
    {
      name: 'vigil_test_ratio',
      help: 'Odd values.',
      type: 'gauge',
      samples: [
        { labels: { k: 'nan' }, value: Number.NaN },
        { labels: { k: 'inf' }, value: Infinity },
      ],
    },
    { name: 'vigil_test_empty_total', help: 'No samples yet.', type: 'counter', samples: [] },
  ]);

  it('writes text that the format reader and promtool accept, escaping help and label values', () => {
    checkMetrics(text);
    expect(text).toContain('# HELP vigil_test_calls_total Calls, by method.\\nA second line with a \\\\ backslash.\n');
    expect(text).toContain('# TYPE vigil_test_calls_total counter\n');
    expect(text).toContain('vigil_test_calls_total{method="we\\"ird\\\\name\\n",outcome="error"} 1\n');
    expect(metricValue(text, 'vigil_test_calls_total', { method: 'we"ird\\name\n' })).toBe(1);
    expect(metricValue(text, 'vigil_test_calls_total', { method: 'send', outcome: 'ok' })).toBe(3);
    expect(text).toContain('vigil_test_ratio{k="inf"} +Inf\n');
    expect(parseExposition(text).types).toMatchObject({ vigil_test_up: 'gauge', vigil_test_empty_total: 'counter' });
  });

  it('refuses what a scraper would refuse', () => {
    expect(() => renderMetrics([{ name: 'bad-name', help: 'x', type: 'gauge', samples: [] }])).toThrow(
      /invalid metric name/,
    );
    expect(() => renderMetrics([{ name: 'calls', help: 'x', type: 'counter', samples: [] }])).toThrow(/_total/);
    expect(() =>
      renderMetrics([{ name: 'g', help: 'x', type: 'gauge', samples: [{ labels: { 'a-b': '1' }, value: 1 }] }]),
    ).toThrow(/label name/);
    expect(() =>
      renderMetrics([{ name: 'g', help: 'x', type: 'gauge', samples: [{ value: 1 }, { value: 2 }] }]),
    ).toThrow(/twice/);
    expect(() => parseExposition('x{a="1"} 1\nx{a="1"} 2\n')).toThrow(/twice/);
    expect(() => parseExposition('x 1')).toThrow(/newline/);
  });

  (PROMTOOL ? it : it.skip)('promtool itself rejects a broken exposition (the check can fail)', () => {
    expect(() => checkMetrics('# TYPE calls counter\ncalls 1\n')).toThrow(/promtool/);
  });

  it('bounds the series a counter keeps', () => {
    const c = new LabelledCounter(['method', 'outcome'], 3);
    c.inc(['a', 'ok']);
    c.inc(['b', 'ok']);
    c.inc(['c', 'ok']);
    for (let i = 0; i < 100; i++) c.inc([`junk${i}`, 'ok']);
    c.inc(['a', 'ok'], 2);
    expect(c.samples()).toHaveLength(4);
    expect(c.get(['other', 'other'])).toBe(100);
    expect(c.get(['a', 'ok'])).toBe(3);
  });
});

describe('ping URLs and webhook alerts', () => {
  it('follows healthchecks.io: /start, the bare URL on 0, /<code> otherwise, the query kept', () => {
    const base = 'https://hc-ping.com/5f0c8c5e-1b7b';
    expect(pingUrl(base, 'start')).toBe(`${base}/start`);
    expect(pingUrl(base, 0)).toBe(base);
    expect(pingUrl(base, 2)).toBe(`${base}/2`);
    expect(pingUrl(`${base}/`, 1)).toBe(`${base}/1`);
    expect(pingUrl('http://127.0.0.1:9/p?rid=1', 'start')).toBe('http://127.0.0.1:9/p/start?rid=1');
  });

  it('builds an alert with the event, the detail, the output, and a text for chat hooks', () => {
    const a = webhookAlert({
      service: 'health-check',
      host: 'h',
      event: 'manual_intervention',
      detail: 'd',
      output: { x: 1 },
      now: 1000,
    });
    expect(a).toEqual({
      source: 'vigil',
      service: 'health-check',
      host: 'h',
      event: 'manual_intervention',
      detail: 'd',
      output: { x: 1 },
      ts: 1,
      time: '1970-01-01T00:00:01.000Z',
      text: '[vigil health-check on h] manual_intervention: d',
    });
  });

  it('validates the new configuration keys', () => {
    const h = healthConfigSchema('/state');
    expect(validateConfig({}, h).ping).toBeUndefined();
    const ok = validateConfig(
      {
        ping: 'http://127.0.0.1:1/p',
        alert: { webhook: { url: 'https://example.org/h', headers: { Authorization: 'Bearer x' } } },
      },
      h,
    );
    expect(ok.alert?.webhook).toEqual({
      url: 'https://example.org/h',
      headers: { Authorization: 'Bearer x' },
      timeoutS: 10,
    });
    expect(ok.pingTimeoutS).toBe(10);
    expect(() => validateConfig({ ping: 'ftp://x/y' }, h)).toThrow(
      /ping: expected an http:\/\/ or https:\/\/ URL, got "ftp:\/\/x\/y"/,
    );
    expect(() =>
      validateConfig({ alert: { webhook: { url: 'http://x/', headers: { 'a b': 'c', d: 'e\nf' } } } }, h),
    ).toThrow(
      /alert\.webhook\.headers\.a b: not a header name; alert\.webhook\.headers\.d: a header value cannot hold a line break/,
    );
    const g = guardianConfigSchema();
    const base = { primary: { model: 'm', service: { kind: 'command', restart: ['true'] } } };
    const cfg = validateConfig(
      { ...base, metricsFile: 'm.prom', alert: { webhook: { url: 'http://127.0.0.1:1/' } } },
      g,
    );
    expect(cfg.metricsFile).toBe('m.prom');
    expect(cfg.alert?.rpc).toBeUndefined();
    expect(() => validateConfig({ ...base, alert: {} }, g)).toThrow(/alert: set rpc and recipient/);
    expect(() => validateConfig({ ...base, alert: { rpc: '127.0.0.1:8080' } }, g)).toThrow(
      /alert\.recipient: required with alert\.rpc/,
    );
  });
});

describe('httpRequest, sendPing, postJson (a real local server)', () => {
  let server: Server | null = null;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => (server ? server.close(r) : r(null)));
    server = null;
  });

  const serve = async (handler: (req: IncomingMessage, res: ServerResponse, body: string) => void) => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => handler(req, res, body));
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  it('pings start then the exit code, and POSTs JSON with the headers', async () => {
    const seen: string[] = [];
    const url = await serve((req, res, body) => {
      seen.push(
        `${req.method} ${req.url} ${req.headers.authorization ?? ''} ${req.headers['content-type'] ?? ''} ${body}`.trim(),
      );
      res.end('OK');
    });
    expect((await sendPing(`${url}/abc`, 'start', 2000)).ok).toBe(true);
    expect((await sendPing(`${url}/abc`, 2, 2000)).ok).toBe(true);
    expect((await sendPing(`${url}/abc`, 0, 2000)).ok).toBe(true);
    const r = await postJson(`${url}/hook`, { a: 1 }, { Authorization: 'Bearer t' }, 2000);
    expect(r).toEqual({ ok: true, status: 200, attempts: 1, detail: 'HTTP 200' });
    expect(seen).toEqual(['GET /abc/start', 'GET /abc/2', 'GET /abc', 'POST /hook Bearer t application/json {"a":1}']);
  });

  it('retries a 5xx with backoff, not a 4xx', async () => {
    let n = 0;
    const url = await serve((req, res) => {
      n += 1;
      res.statusCode = req.url === '/bad' ? 400 : n < 3 ? 503 : 200;
      res.end(res.statusCode === 200 ? 'OK' : 'nope');
    });
    const r = await httpRequest(`${url}/flaky`, { timeoutMs: 5000, attempts: 3, backoffMs: 10 });
    expect(r).toMatchObject({ ok: true, status: 200, attempts: 3 });
    n = 0;
    const bad = await httpRequest(`${url}/bad`, { timeoutMs: 5000, attempts: 3, backoffMs: 10 });
    expect(bad).toEqual({ ok: false, status: 400, attempts: 1, detail: 'HTTP 400: nope' });
  });

  it('is bounded in time as a whole when the server never answers', async () => {
    const url = await serve(() => {}); // holds every request
    const t0 = performance.now();
    const r = await httpRequest(`${url}/hang`, { timeoutMs: 300, attempts: 3 });
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(r.ok).toBe(false);
    expect(r.detail).toMatch(/timed out after \d+ ms/);
  });

  it('reports a refused connection and a bad URL without throwing', async () => {
    const url = await serve((_q, res) => res.end());
    const port = Number(new URL(url).port);
    await new Promise((r) => server!.close(r));
    server = null;
    const r = await httpRequest(`http://127.0.0.1:${port}/x`, { timeoutMs: 2000, attempts: 2, backoffMs: 10 });
    expect(r).toMatchObject({ ok: false, status: null, attempts: 2 });
    expect(r.detail).toMatch(/ECONNREFUSED/);
    expect(await httpRequest('not a url', { timeoutMs: 10 })).toMatchObject({ ok: false, attempts: 0 });
  });

  it('reads only the start of a large answer', async () => {
    const url = await serve((_q, res) => {
      res.statusCode = 500;
      res.end('x'.repeat(5_000_000));
    });
    const r = await httpRequest(`${url}/big`, { timeoutMs: 5000 });
    expect(r.status).toBe(500);
    expect(r.detail.length).toBeLessThan(300);
  });
});

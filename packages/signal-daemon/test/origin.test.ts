/**
 * Browsers cannot read the daemon: a web page's request (it carries `Origin`) to the RPC or
 * events path is refused with 403 unless the operator allowed that origin (--allow-origin); a
 * refused event stream takes nothing, so held messages wait for the real consumer. Real
 * processes, a real EventSource client sending Origin as a browser's does.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { EventSource } from 'eventsource';
import { http, rpc, spawnDaemon, startDaemon, tmpDir, url } from './helpers.js';

const A = '+15550000001';
const B = '+15550000002';
const EVIL = 'http://evil.example';
const APP = 'http://localhost:3000';

const tmp = tmpDir();
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});
afterAll(() => tmp.cleanup());

/** An EventSource as a page of `origin` opens it: the browser adds the Origin header. */
function pageEventSource(target: string, origin?: string): Promise<{ status: number; got: string[]; es: EventSource }> {
  const got: string[] = [];
  let status = 0;
  const es = new EventSource(target, {
    fetch: async (input, init) => {
      const headers = new Headers(init.headers);
      if (origin) headers.set('origin', origin);
      const res = await fetch(input, { ...init, headers });
      status = res.status;
      return res;
    },
  });
  es.addEventListener('receive', (e) => got.push(JSON.parse(e.data).envelope.dataMessage.message));
  return new Promise((resolve) => {
    es.onopen = () => resolve({ status, got, es });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) resolve({ status, got, es });
    };
  });
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('web origins', () => {
  it('refuses a cross-origin event stream and RPC with 403; held messages go to the real consumer', async () => {
    const localnet = join(tmp.dir, 'localnet.sqlite');
    const b = await startDaemon(tmp.dir, B);
    const a = await spawnDaemon([
      ...['-a', A, '--http', '127.0.0.1:0', '--tcp', 'off', '--localnet', localnet, '--data-dir', join(tmp.dir, 'a')],
      ...['--allow-origin', APP],
    ]);
    children.push(a.child);
    try {
      for (const m of ['h1', 'h2', 'h3']) {
        expect((await rpc(b.http!, 'send', { recipient: A, message: m })).result).toBeDefined();
      }
      // A page of another origin: refused before anything is read, no CORS headers.
      const page = await pageEventSource(`${url(a.http!)}/api/v1/events`, EVIL);
      expect(page.status).toBe(403);
      expect(page.es.readyState).toBe(EventSource.CLOSED);
      expect(page.got).toEqual([]);
      const raw = await http(a.http!, { method: 'GET', path: '/api/v1/events', headers: { origin: 'null' } });
      expect(raw.status).toBe(403);
      expect(raw.headers['access-control-allow-origin']).toBeUndefined();
      // Its RPC too: a "simple" POST a page can send without a preflight is not run.
      const post = await http(a.http!, {
        headers: { 'content-type': 'application/json', origin: EVIL },
        body: JSON.stringify({
          jsonrpc: '2.0',
          method: 'send',
          params: { recipient: B, message: 'from a page' },
          id: 1,
        }),
      });
      expect(post.status).toBe(403);
      expect(post.text).toContain('--allow-origin');
      // The allowed origin gets its preflight and its CORS header.
      const pre = await http(a.http!, {
        method: 'OPTIONS',
        headers: { origin: APP, 'access-control-request-method': 'POST' },
      });
      expect(pre.status).toBe(204);
      expect(pre.headers['access-control-allow-origin']).toBe(APP);
      const ok = await http(a.http!, {
        headers: { 'content-type': 'application/json', origin: APP },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'version', id: 1 }),
      });
      expect(ok.status).toBe(200);
      expect(ok.headers['access-control-allow-origin']).toBe(APP);
      // The real consumer (no Origin) gets every held message, in order.
      const consumer = await pageEventSource(`${url(a.http!)}/api/v1/events`);
      expect(consumer.status).toBe(200);
      await until(() => consumer.got.length >= 3);
      expect(consumer.got).toEqual(['h1', 'h2', 'h3']);
      consumer.es.close();
    } finally {
      await b.close();
    }
  });

  it('refuses every origin by default, and a bad --allow-origin at start (exit 78)', async () => {
    const a = await spawnDaemon([
      ...['-a', A, '--http', '127.0.0.1:0', '--tcp', 'off', '--localnet', join(tmp.dir, 'd.sqlite')],
      ...['--data-dir', join(tmp.dir, 'd')],
    ]);
    children.push(a.child);
    const r = await http(a.http!, {
      method: 'GET',
      path: '/api/v1/events',
      headers: { origin: 'http://localhost:3000' },
    });
    expect(r.status).toBe(403);
    // /api/v1/check is not a browser's way in: it answers as before.
    expect((await http(a.http!, { method: 'GET', path: '/api/v1/check', headers: { origin: EVIL } })).status).toBe(200);
    await expect(
      spawnDaemon(['-a', A, '--http', '127.0.0.1:0', '--tcp', 'off', '--allow-origin', 'evil.example/x']),
    ).rejects.toThrow(/exited with 78[\s\S]*--allow-origin: invalid origin "evil.example\/x"/);
  });
});

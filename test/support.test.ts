/**
 * The tests' free ports: below the kernel's ephemeral range (where no outgoing connection can take
 * them before a service binds), free when handed out, never handed out twice, and never one a
 * listener holds.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { describe, expect, it } from '@jest/globals';
import { freePort } from './support.js';

const HOST = '127.0.0.2';
const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);

describe('freePort', () => {
  it('hands out distinct ports below the ephemeral range that can be listened on', async () => {
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort(HOST));
    expect(new Set(ports).size).toBe(ports.length);
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(1024);
      expect(p).toBeLessThan(low);
    }
    // Each can be bound now.
    const servers: Server[] = [];
    try {
      for (const p of ports.slice(0, 10)) {
        const s = createServer();
        await new Promise<void>((resolve, reject) => {
          s.once('error', reject);
          s.listen(p, HOST, resolve);
        });
        servers.push(s);
      }
      expect(servers).toHaveLength(10);
    } finally {
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    }
  });

  it('skips a port another listener holds', async () => {
    // Other listeners hold 800 random ports of the range freePort draws from (about 5% of it);
    // without its check, 200 draws would hit about ten of them. On 127.0.0.2, so that no service of
    // another test (on 127.0.0.1) finds its port taken meanwhile.
    const from = Math.max(1024, low - 16384);
    const held: Server[] = [];
    const heldPorts = new Set<number>();
    try {
      while (held.length < 800) {
        const p = from + Math.floor(Math.random() * (low - from));
        if (heldPorts.has(p)) continue;
        const s = createServer();
        const ok = await new Promise<boolean>((resolve) => {
          s.once('error', () => resolve(false));
          s.listen(p, HOST, () => resolve(true));
        });
        if (!ok) continue;
        held.push(s);
        heldPorts.add(p);
      }
      for (let i = 0; i < 200; i++) expect(heldPorts.has(await freePort(HOST))).toBe(false);
    } finally {
      await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    }
  });
});

/** Test helpers for the relay: an in-process relay on loopback, echo targets, a line client. */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { type HostPort, type Logger, memoryLogger, RELAY_REFUSED_METHODS } from '@vigil/shared-types';
import { defaultAllow } from '../src/cidr.js';
import { type RelayConfig, type RelayHandle, startRelay } from '../src/relay.js';

export { TcpClient, tmpDir } from '../../signal-daemon/test/helpers.js';

/** A relay in this process listening on 127.0.0.2 (a loopback address other than the target's). */
export async function relay(
  target: HostPort,
  extra: Partial<RelayConfig> = {},
): Promise<RelayHandle & { logs: Record<string, unknown>[]; addr: HostPort }> {
  const logs: Record<string, unknown>[] = [];
  const listen = extra.listen ?? { host: '127.0.0.2', port: 0 };
  const h = await startRelay({
    listen,
    target,
    allow: defaultAllow(listen.host),
    maxConnections: 512,
    connectTimeoutMs: 2000,
    idleTimeoutMs: 0,
    refuse: RELAY_REFUSED_METHODS,
    maxLineBytes: 1024 * 1024,
    maxBytesPerMinute: 0,
    bindRetryMs: 50,
    watchIntervalMs: 100,
    shutdownGraceMs: 500,
    logger: memoryLogger(logs) as Logger,
    ...extra,
  });
  const addr = await h.listening();
  return Object.assign(h, { logs, addr });
}

/** A target that echoes every byte back, and ends its side when the peer ends. */
export function echoServer(host = '127.0.0.1'): Promise<Server & { addr: HostPort; sockets: Set<Socket> }> {
  return new Promise((resolve) => {
    const sockets = new Set<Socket>();
    const s = createServer({ allowHalfOpen: true }, (c) => {
      sockets.add(c);
      c.on('close', () => sockets.delete(c));
      c.on('error', () => {});
      c.pipe(c);
    });
    s.listen(0, host, () => {
      const a = s.address() as { port: number };
      resolve(Object.assign(s, { addr: { host, port: a.port }, sockets }));
    });
  });
}

export function closeServer(s: Server & { sockets?: Set<Socket> }): Promise<void> {
  for (const c of s.sockets ?? []) c.destroy();
  return new Promise((resolve) => s.close(() => resolve()));
}

export { until } from '../../../test/support.js';

/**
 * A guest of a relay in front of an echo server: what comes back is collected as text; `ended`
 * resolves when the relay ends the guest's connection; `close` stops all three.
 */
export async function echoGuest(extra: Partial<RelayConfig> = {}) {
  const echo = await echoServer();
  const r = await relay(echo.addr, extra);
  const sock = connect(r.addr.port, r.addr.host);
  let got = '';
  sock.setEncoding('utf8');
  sock.on('data', (d: string) => {
    got += d;
  });
  const ended = new Promise<void>((resolve) => sock.on('end', resolve));
  return {
    r,
    sock,
    ended,
    got: () => got,
    close: async () => {
      sock.destroy();
      await r.close();
      await closeServer(echo);
    },
  };
}

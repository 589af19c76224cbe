/**
 * The daemon and its consumers over the network: a TCP connect, and the daemon's JSON-RPC and
 * status through its client of shared-types (`daemonClient`). Each bounded in time.
 */
import { connect } from 'node:net';
import type { DaemonStatus, HostPort } from '@vigil/shared-types';
import { type DaemonClient, daemonClient } from '@vigil/shared-types/node';

/** True when a TCP connection to the address is accepted within the timeout. */
export function tcpAccepts(addr: HostPort, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: addr.host, port: addr.port });
    const done = (ok: boolean) => {
      clearTimeout(t);
      s.destroy();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** The daemon's client for one check: each call bounded by `timeoutMs`, on its own connection. */
export const daemonAt = (addr: HostPort, timeoutMs: number): DaemonClient =>
  daemonClient(addr, { timeoutMs, userAgent: 'vigil-health-check' });

/** The daemon's JSON status (serving or not); null when it does not give one. */
export async function daemonStatus(addr: HostPort, timeoutMs: number): Promise<DaemonStatus | null> {
  try {
    return (await daemonAt(addr, timeoutMs).status()).status;
  } catch {
    return null;
  }
}

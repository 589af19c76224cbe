/**
 * A free TCP port for a server a test or a benchmark is about to start. One implementation for
 * every test helper and benchmark script.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The first port of the kernel's ephemeral range (where outgoing connections get theirs). */
export function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}

/** Ports handed out by this process: never twice, even before the first is bound. */
const handedOut = new Set<number>();

function listensOn(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/**
 * A TCP port nothing listens on right now, on the given address. Taken below the ephemeral
 * range: a port the kernel hands out (listen on port 0) can be given meanwhile to any outgoing
 * connection on the host, as the local end of a client socket, and the service started on it
 * seconds later then fails with EADDRINUSE. Below the range only another listener can take it,
 * and the port is checked free first. Never the same port twice in one process.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const low = ephemeralLow();
  const from = Math.max(1024, low - 16384);
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * (low - from));
    if (handedOut.has(port) || !(await listensOn(port, host))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found in ${from}-${low - 1} on ${host}`);
}

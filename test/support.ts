/** Helpers the tests of every package share: child processes, free ports, waiting for a condition. */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Resolves once the child has exited and its output has been read to the end: 'exit' can come
 * before the last lines on its pipes are read, 'close' comes after both.
 */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const drained = [child.stdout, child.stderr].every((s) => !s || s.destroyed || s.readableEnded);
  if ((child.exitCode !== null || child.signalCode !== null) && drained) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
}

/** The first port of the kernel's ephemeral range (where outgoing connections get theirs). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 2048 ? low : 32768;
  } catch {
    return 32768;
  }
}
const LOW = ephemeralLow();
/** Ports handed out by this process: never twice, even before the first is bound. */
const handedOut = new Set<number>();

function listensOn(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, host, () => s.close(() => resolve(true)));
  });
}

/**
 * A TCP port nothing listens on right now, on the given loopback address. Taken below the
 * ephemeral range: a port the kernel hands out (listen on port 0) can be given meanwhile to any
 * outgoing connection on the host, as the local end of a client socket, and the service started
 * on it seconds later then fails with EADDRINUSE. Below the range only another listener can take
 * it, and the port is checked free first.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const from = Math.max(1024, LOW - 16384);
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * (LOW - from));
    if (handedOut.has(port) || !(await listensOn(port, host))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free port found in ${from}-${LOW - 1} on ${host}`);
}

/** Waits until the predicate holds (polling), or fails naming what did not happen. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

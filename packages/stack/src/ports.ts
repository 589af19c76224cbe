/**
 * Before anything starts: every listener of the stack must be free. A port in use stops the
 * start with one line naming the port and the process that holds it.
 */
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import type { HostPort } from '@vigil/shared-types';
import { listenersOn, listProcesses, sleep } from '@vigil/shared-types/node';
import { hp, type StackOptions } from './config.js';
import { StartError } from './errors.js';

/** Whether an address is on one of this host's interfaces. */
export const hostHas = (ip: string): boolean =>
  Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === ip));

/** The relay's address: the option's, else 10.0.0.1:7583 when the host has it, else loopback (said so). */
export function relayAddress(
  opts: StackOptions,
  has: (ip: string) => boolean = hostHas,
): { relay: HostPort; note: string } {
  if (opts.relay) return { relay: opts.relay, note: '' };
  if (has('10.0.0.1')) return { relay: { host: '10.0.0.1', port: 7583 }, note: '' };
  return {
    relay: { host: '127.0.0.1', port: 7584 },
    note: ' (10.0.0.1 is not on this host: listening on loopback instead; --relay to choose)',
  };
}

/**
 * A command line as shown to a person: whole (a node under a long path must not hide the script),
 * only one over 500 characters cut at a word boundary.
 */
export function shownCommand(command: string): string {
  if (command.length <= 500) return command;
  const cut = command.lastIndexOf(' ', 500);
  return `${command.slice(0, cut > 0 ? cut : 500)} …`;
}

/** Who holds a TCP port: "pid N (command)", or "" when it cannot be told. */
export async function holderOf(port: number): Promise<string> {
  try {
    const pids = await listenersOn(port);
    if (pids.length === 0) return '';
    const procs = await listProcesses();
    return pids
      .map((pid) => `pid ${pid} (${shownCommand(procs.find((p) => p.pid === pid)?.command ?? '?')})`)
      .join(', ');
  } catch {
    return '';
  }
}

/** null when the address can be listened on now, else the error's code (EADDRINUSE, …). */
export function bindable(addr: HostPort): Promise<string | null> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'EUNKNOWN'));
    s.listen(addr.port, addr.host, () => s.close(() => resolve(null)));
  });
}

export interface Listener {
  readonly flag: string;
  readonly what: string;
  readonly addr: HostPort;
}

/**
 * Refuses (StartError) a port 0, a port in use (naming its holder) or an address that cannot be
 * listened on; the relay's link address may be absent (the relay waits for it). `settleMs`: how
 * long a port in use may take to be freed (by processes being stopped just before).
 */
export async function checkListeners(listeners: readonly Listener[], settleMs = 0): Promise<void> {
  for (const { flag, what, addr } of listeners) {
    if (addr.port === 0) {
      throw new StartError(
        `${flag}: the stack needs fixed ports (the health check and the guardian are configured with them)`,
      );
    }
    let code = await bindable(addr);
    for (const end = Date.now() + settleMs; code === 'EADDRINUSE' && Date.now() < end; ) {
      await sleep(50);
      code = await bindable(addr);
    }
    if (code === 'EADDRINUSE') {
      const holder = await holderOf(addr.port);
      throw new StartError(
        `port ${addr.port} (${hp(addr)}, ${what}) is already in use${holder ? ` by ${holder}` : ''}. Stop it, or give ${flag} another address.`,
      );
    }
    if (code && !(flag === '--relay' && code === 'EADDRNOTAVAIL')) {
      throw new StartError(`cannot listen on ${hp(addr)} (${what}): ${code}`);
    }
  }
}

/** Listening with a clear error, and closing a listener. */
import type { AddressInfo, Server } from 'node:net';
import { VIGIL_ERRORS, VigilError } from '../errors.js';
import { formatHostPort, type HostPort } from '../net.js';

/**
 * A listen failure, in an operator's words: "cannot listen for HTTP on 127.0.0.1:8080: address
 * already in use". Its code is VIGIL_ERR_LISTEN; the system's (`EADDRINUSE`, …) is `cause.code`.
 */
export class ListenError extends VigilError {
  constructor(what: string, addr: HostPort, cause: NodeJS.ErrnoException) {
    const reason =
      cause.code === 'EADDRINUSE'
        ? 'address already in use'
        : cause.code === 'EADDRNOTAVAIL'
          ? 'address not available on this host'
          : cause.code === 'EACCES'
            ? 'permission denied'
            : (cause.message ?? String(cause));
    super(VIGIL_ERRORS.VIGIL_ERR_LISTEN, `cannot listen for ${what} on ${formatHostPort(addr)}: ${reason}`, { cause });
  }
}

/** Listens (exclusively) on `addr`; the bound address (the real port when 0 was asked for). */
export function listen(server: Server, addr: HostPort, what: string): Promise<HostPort> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => reject(new ListenError(what, addr, err));
    server.once('error', onError);
    server.listen({ host: addr.host, port: addr.port, exclusive: true }, () => {
      server.off('error', onError);
      const a = server.address() as AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

/** Stops accepting; resolves when the listener is closed (at once when it was not listening). */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

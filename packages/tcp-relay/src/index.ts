/**
 * Republish the messaging daemon's TCP listener on the host-to-VM link address.
 *
 * This version has the package's command line and contracts; the service itself comes in a
 * later version, and until then `start` refuses with a clear error.
 */

export { VERSION } from './version.js';

export interface TcpRelayConfig {
  readonly [key: string]: unknown;
}

export interface TcpRelayHandle {
  close(): Promise<void>;
}

export class NotImplementedError extends Error {
  readonly code = 'ENOTIMPL';
  constructor(what: string) {
    super(`${what} is not implemented in this version`);
    this.name = 'NotImplementedError';
  }
}

export async function start(_config: TcpRelayConfig): Promise<TcpRelayHandle> {
  throw new NotImplementedError('tcp-relay');
}

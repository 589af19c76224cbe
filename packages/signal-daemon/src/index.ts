/**
 * Serve one messaging account over JSON-RPC (HTTP and TCP) with Server-Sent Events of incoming messages.
 *
 * This version has the package's command line and contracts; the service itself comes in a
 * later version, and until then `start` refuses with a clear error.
 */

export { VERSION } from './version.js';

export interface SignalDaemonConfig {
  readonly [key: string]: unknown;
}

export interface SignalDaemonHandle {
  close(): Promise<void>;
}

export class NotImplementedError extends Error {
  readonly code = 'ENOTIMPL';
  constructor(what: string) {
    super(`${what} is not implemented in this version`);
    this.name = 'NotImplementedError';
  }
}

export async function start(_config: SignalDaemonConfig): Promise<SignalDaemonHandle> {
  throw new NotImplementedError('signal-daemon');
}

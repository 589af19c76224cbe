/**
 * Prove every minute that the inference server really answers; restart, rate-limit, fall back.
 *
 * This version has the package's command line and contracts; the service itself comes in a
 * later version, and until then `start` refuses with a clear error.
 */

export { VERSION } from './version.js';

export interface GuardianConfig {
  readonly [key: string]: unknown;
}

export interface GuardianHandle {
  close(): Promise<void>;
}

export class NotImplementedError extends Error {
  readonly code = 'ENOTIMPL';
  constructor(what: string) {
    super(`${what} is not implemented in this version`);
    this.name = 'NotImplementedError';
  }
}

export async function start(_config: GuardianConfig): Promise<GuardianHandle> {
  throw new NotImplementedError('guardian');
}

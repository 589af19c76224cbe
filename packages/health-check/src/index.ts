/**
 * Check the messaging side and its consumer; repair with --fix.
 *
 * This version has the package's command line and contracts; the service itself comes in a
 * later version, and until then `start` refuses with a clear error.
 */

export { VERSION } from './version.js';

export interface HealthCheckConfig {
  readonly [key: string]: unknown;
}

export interface HealthCheckHandle {
  close(): Promise<void>;
}

export class NotImplementedError extends Error {
  readonly code = 'ENOTIMPL';
  constructor(what: string) {
    super(`${what} is not implemented in this version`);
    this.name = 'NotImplementedError';
  }
}

export async function start(_config: HealthCheckConfig): Promise<HealthCheckHandle> {
  throw new NotImplementedError('health-check');
}

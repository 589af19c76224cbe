/**
 * Serve a local language model over an OpenAI-style HTTP API and mutual TLS.
 *
 * This version has the package's command line and contracts; the service itself comes in a
 * later version, and until then `start` refuses with a clear error.
 */

export { VERSION } from './version.js';

export interface InferenceServerConfig {
  readonly [key: string]: unknown;
}

export interface InferenceServerHandle {
  close(): Promise<void>;
}

export class NotImplementedError extends Error {
  readonly code = 'ENOTIMPL';
  constructor(what: string) {
    super(`${what} is not implemented in this version`);
    this.name = 'NotImplementedError';
  }
}

export async function start(_config: InferenceServerConfig): Promise<InferenceServerHandle> {
  throw new NotImplementedError('inference-server');
}

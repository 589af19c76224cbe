import type { BackendKind } from './config.js';

export type BackendState = 'serving' | 'starting' | 'down';

/**
 * What the daemon needs of a messaging network: call a method, and deliver incoming envelopes
 * into the daemon's inbox (the backend stores them there itself, so that a message is never
 * acknowledged before it is stored). The transports, the inbox, the check endpoint and the
 * daemon's own methods (version, the receive subscriptions) are the same for every backend.
 */
export interface Backend {
  readonly kind: BackendKind;
  state(): BackendState;
  /**
   * The signal-cli version whose JSON-RPC interface this backend offers: the embedded network's
   * SIGNAL_CLI_INTERFACE, or the version signal-cli reported (null until it has).
   */
  signalCliInterface(): string | null;
  /** A fault that makes sends fail while the backend still answers (a full disk), or null. */
  fault?(): string | null;
  /** True when calls of this method go to the backend (else the daemon answers -32601). */
  handles(method: string): boolean;
  /** Calls a method; throws RpcFailure for errors the client must see, unchanged. */
  call(method: string, params: unknown): Promise<unknown>;
  close(): Promise<void>;
}

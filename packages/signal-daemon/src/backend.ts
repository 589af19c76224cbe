import type { BackendKind } from './config.js';

export type BackendState = 'serving' | 'starting' | 'down';

/**
 * What the daemon needs of a messaging network: call a method, and deliver incoming envelopes
 * into the daemon's inbox (the backend stores them there itself, so that a message is never
 * acknowledged before it is stored).
 */
export interface Backend {
  readonly kind: BackendKind;
  state(): BackendState;
  /** The methods this backend implements (the daemon itself adds version and the receive subscriptions). */
  readonly methods: ReadonlySet<string>;
  /** Calls a method; throws RpcFailure for errors the client must see. */
  call(method: string, params: unknown): Promise<unknown>;
  /** Unix ms of the last successful outbound send and inbound message, or null. */
  readonly lastOutboundSendAt: number | null;
  readonly lastInboundMessageAt: number | null;
  close(): Promise<void>;
}

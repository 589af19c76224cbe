import type { Logger } from '@vigil/shared-types';
import {
  failure,
  type Incoming,
  type JsonRpcResponse,
  type ParsedMessage,
  RpcErrorCode,
  rpcError,
  success,
} from '@vigil/shared-types';
import { RpcFailure } from './errors.js';

/** Calls one method; throws RpcFailure (or anything else, which becomes -32603). */
export type Invoke = (method: string, params: unknown) => Promise<unknown>;

export type Reply = JsonRpcResponse | JsonRpcResponse[] | undefined;

/**
 * JSON-RPC dispatch, the same for HTTP and TCP: one reply per call, none for a notification;
 * a batch gets an array of the replies due (none at all when every element was a notification).
 */
export class Dispatcher {
  /** Calls under way, for a bounded drain at shutdown. */
  inFlight = 0;
  private idle: (() => void)[] = [];

  constructor(private readonly logger: Logger) {}

  async dispatch(message: ParsedMessage, invoke: Invoke): Promise<Reply> {
    switch (message.kind) {
      case 'error':
        return failure(null, message.error);
      case 'single':
        return this.one(message.item, invoke);
      case 'batch': {
        const replies = await Promise.all(message.items.map((item) => this.one(item, invoke)));
        const due = replies.filter((r): r is JsonRpcResponse => r !== undefined);
        return due.length > 0 ? due : undefined;
      }
    }
  }

  private async one(item: Incoming, invoke: Invoke): Promise<JsonRpcResponse | undefined> {
    if (item.kind === 'invalid') return failure(item.id, item.error);
    this.inFlight++;
    try {
      const result = await invoke(item.method, item.params);
      return item.kind === 'call' ? success(item.id, result ?? null) : undefined;
    } catch (err) {
      if (err instanceof RpcFailure) {
        return item.kind === 'call' ? failure(item.id, err.toObject()) : undefined;
      }
      this.logger.error('method failed unexpectedly', { method: item.method, error: String(err) });
      const detail = err instanceof Error ? err.message : String(err);
      return item.kind === 'call'
        ? failure(item.id, rpcError(RpcErrorCode.INTERNAL_ERROR, `Internal error: ${detail}`))
        : undefined;
    } finally {
      this.inFlight--;
      if (this.inFlight === 0) for (const done of this.idle.splice(0)) done();
    }
  }

  /** Resolves when no call is under way, or after `ms`, whichever comes first. */
  drain(ms: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.idle.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

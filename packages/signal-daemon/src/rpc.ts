import type { Logger } from '@vigil/shared-types';
import {
  batchTooLarge,
  failure,
  type Incoming,
  type JsonRpcResponse,
  type ParsedMessage,
  RpcErrorCode,
  rpcError,
  success,
} from '@vigil/shared-types';
import { RpcFailure } from './errors.js';

/**
 * Calls one method: its result, or a promise of it. A method that can answer at once (`version`,
 * the receive subscriptions) returns the result itself, so its reply is written in the same turn
 * as the request was read; one that waits returns a promise. Throws (or rejects with) RpcFailure,
 * or anything else, which becomes -32603.
 */
export type Invoke = (method: string, params: unknown, call?: CallContext) => unknown;

/** What a method may know of the caller: `gone` is aborted when the caller's connection closes. */
export interface CallContext {
  readonly gone: AbortSignal;
}

type Connection = { once(event: string, listener: () => void): unknown; readonly destroyed: boolean };

/** The events that end a connection by default: an HTTP response's or a socket's `close`. */
const CLOSE: readonly string[] = ['close'];

/**
 * A call's context as an instance of one class, its getter on the prototype: every call context
 * has the same shape. Made as an object literal with a getter (a new closure for each call), the
 * contexts of an HTTP `version` load made V8's young-generation collections 3–5 ms each, every
 * ~25 ms, with megabytes promoted to the old generation at each (0.3 ms and nothing promoted as a
 * class), and the daemon answered ~25% fewer calls at a p99 2.5× as long (the README's benchmark).
 */
class ConnectionCall implements CallContext {
  private controller: AbortController | undefined;

  constructor(
    private readonly conn: Connection,
    private readonly events: readonly string[],
  ) {}

  get gone(): AbortSignal {
    if (!this.controller) {
      const c = new AbortController();
      this.controller = c;
      if (this.conn.destroyed) c.abort();
      else for (const event of this.events) this.conn.once(event, () => c.abort());
    }
    return this.controller.signal;
  }
}

/**
 * The call context of a connection (an HTTP response, a TCP socket): its signal is made when first
 * asked for (most calls never ask), and aborted at the first of `events`, or at once when the
 * connection is gone already.
 */
export function callContext(conn: Connection, events: readonly string[] = CLOSE): CallContext {
  return new ConnectionCall(conn, events);
}

export type Reply = JsonRpcResponse | JsonRpcResponse[] | undefined;

/** True for a promise (or any thenable): the value is not there yet. */
export function isPending<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/**
 * Calls `run` and gives its result to `ok`, or what it threw or rejected with to `fail`: at once
 * when it answered at once, else when its promise settles (then as a promise).
 */
export function settle<T>(run: () => unknown, ok: (value: unknown) => T, fail: (err: unknown) => T): T | Promise<T> {
  let result: unknown;
  try {
    result = run();
  } catch (err) {
    return fail(err);
  }
  return isPending(result) ? Promise.resolve(result).then(ok, fail) : ok(result);
}

/** A batch is started this many requests per event-loop turn, so that other clients are served between. */
export const BATCH_SLICE = 64;

/**
 * JSON-RPC dispatch, the same for HTTP and TCP: one reply per call, none for a notification;
 * a batch gets an array of the replies due (none at all when every element was a notification).
 * The reply is returned directly when every method called answered at once, else as a promise.
 * A batch of more than `maxBatch` requests is refused whole (-32600, nothing of it run); a long
 * one is started BATCH_SLICE requests per turn of the event loop, never all in one turn.
 */
export class Dispatcher {
  /** Calls under way, for a bounded drain at shutdown. */
  inFlight = 0;
  private idle: (() => void)[] = [];

  constructor(
    private readonly logger: Logger,
    private readonly maxBatch = Number.POSITIVE_INFINITY,
  ) {}

  dispatch(message: ParsedMessage, invoke: Invoke): Reply | Promise<Reply> {
    switch (message.kind) {
      case 'error':
        return failure(null, message.error);
      case 'single':
        return this.one(message.item, invoke);
      case 'batch': {
        const items = message.items;
        if (items.length > this.maxBatch) return batchTooLarge(items.length, this.maxBatch);
        if (items.length > BATCH_SLICE) return this.sliced(items, invoke);
        const replies = items.map((item) => this.one(item, invoke));
        return replies.some(isPending) ? Promise.all(replies).then(due) : due(replies as Answer[]);
      }
    }
  }

  /** A long batch, started a slice per turn: the calls of one slice run while the next waits its turn. */
  private async sliced(items: readonly Incoming[], invoke: Invoke): Promise<Reply> {
    const replies: (Answer | Promise<Answer>)[] = [];
    for (let i = 0; i < items.length; i += BATCH_SLICE) {
      if (i > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      for (const item of items.slice(i, i + BATCH_SLICE)) replies.push(this.one(item, invoke));
    }
    return due(await Promise.all(replies));
  }

  private one(item: Incoming, invoke: Invoke): Answer | Promise<Answer> {
    if (item.kind === 'invalid') return failure(item.id, item.error);
    this.inFlight++;
    return settle(
      () => invoke(item.method, item.params),
      (value) => {
        this.settled();
        return item.kind === 'call' ? success(item.id, value ?? null) : undefined;
      },
      (err) => {
        this.settled();
        return this.failed(item, err);
      },
    );
  }

  private failed(item: Exclude<Incoming, { kind: 'invalid' }>, err: unknown): Answer {
    if (err instanceof RpcFailure) {
      return item.kind === 'call' ? failure(item.id, err.toObject()) : undefined;
    }
    this.logger.error('method failed unexpectedly', { method: item.method, error: String(err) });
    const detail = err instanceof Error ? err.message : String(err);
    return item.kind === 'call'
      ? failure(item.id, rpcError(RpcErrorCode.INTERNAL_ERROR, `Internal error: ${detail}`))
      : undefined;
  }

  private settled(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.idle.length > 0) for (const done of this.idle.splice(0)) done();
  }

  /** Resolves when no call is under way (and their replies are written), or after `ms`, whichever comes first. */
  drain(ms: number): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.idle.push(() => {
        clearTimeout(t);
        // After this turn's microtasks: the last calls' replies are written before connections close.
        setImmediate(resolve);
      });
    });
  }
}

/** One element's reply: none for a notification. */
type Answer = JsonRpcResponse | undefined;

/** The replies due in a batch: none at all when every element was a notification. */
function due(replies: readonly Answer[]): Reply {
  const out = replies.filter((r): r is JsonRpcResponse => r !== undefined);
  return out.length > 0 ? out : undefined;
}

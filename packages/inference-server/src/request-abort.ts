/**
 * A request's end, whatever comes first: its deadline (`--request-timeout`, queueing included),
 * its client leaving, or the shutdown (the server aborts every request in `inFlight`). Every
 * request that runs on the model (generation, embeddings) arms one.
 */
import type { ServerResponse } from 'node:http';
import type { ServerContext } from './context.js';
import { EndReason } from './errors.js';

/** A request's end, whatever comes first: its deadline, its client leaving, the shutdown. */
export interface RequestAbort {
  readonly signal: AbortSignal;
  /** Rejects when the request is aborted, whatever the native side does. */
  readonly aborted: Promise<never>;
  /** Clears the deadline and forgets the request (call once, at its end). */
  done(): void;
}

/** Arms the deadline (`--request-timeout`, queueing included) and the client's leaving for one request. */
export function requestAbort(ctx: ServerContext, res: ServerResponse, what = 'The completion'): RequestAbort {
  const ac = new AbortController();
  const abort = (reason: EndReason) => {
    if (!ac.signal.aborted) ac.abort(reason);
  };
  ctx.inFlight.add(abort);
  const s = ctx.config.requestTimeoutMs / 1000;
  const timer = setTimeout(
    () => abort(new EndReason('timeout', `${what} did not finish within ${s} s (--request-timeout) and was stopped.`)),
    ctx.config.requestTimeoutMs,
  );
  res.on('close', () => {
    if (!res.writableFinished) abort(new EndReason('client', 'The client closed the connection.'));
  });
  const aborted = new Promise<never>((_, reject) => {
    if (ac.signal.aborted) reject(ac.signal.reason);
    ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
  });
  aborted.catch(() => {});
  return {
    signal: ac.signal,
    aborted,
    done: () => {
      clearTimeout(timer);
      ctx.inFlight.delete(abort);
    },
  };
}

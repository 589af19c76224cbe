import { RpcErrorCode } from '@vigil/shared-types';
import { consumerNameError, POLL_CONSUMER } from './consumers.js';
import { RpcFailure, userError } from './errors.js';
import type { Inbox } from './inbox.js';
import { optBool, type Params } from './params.js';

/**
 * `receive`, the polling method of signal-cli's manual mode, as a consumer of the inbox (see
 * consumers.ts): it returns what arrived since this consumer's last `receive`, as an array of
 * `{"envelope":…,"account":…}` (the params of a `receive` notification), and moves the consumer's
 * mark past what it returned. Nothing there: it waits up to `timeout` seconds for a message,
 * without blocking anything, and gives up early when the caller goes away.
 */

/** signal-cli's JSON-RPC default (ReceiveCommand.ReceiveParams): seconds. */
const DEFAULT_TIMEOUT_S = 3;
/** One batch: at most this many messages... */
const MAX_BATCH = 10_000;
/** ...and this many bytes of JSON past the first (the rest comes with the next `receive`). */
const MAX_BATCH_BYTES = 16 * 1024 * 1024;
/** setTimeout's longest wait (about 24.8 days); a longer timeout waits this long. */
const MAX_WAIT_MS = 2 ** 31 - 1;
/** signal-cli's answer (-1) when something else receives already. */
export const ALREADY_RECEIVING = 'Receive command cannot be used if messages are already being received.';

export interface PollRequest {
  readonly params: Params;
  /** The caller's connection receives notifications already (TCP on-start mode, or a subscription). */
  readonly receiving: boolean;
  /** Aborted when the caller's connection closes. */
  readonly gone: AbortSignal | undefined;
  readonly knownConsumers: ReadonlySet<string>;
  /** The consumer when the params name none: `poll`, or `relay` on a connection from the relay. */
  readonly defaultConsumer?: string;
}

/** Consumers with a `receive` under way: a second at the same time is refused, as signal-cli refuses it. */
export class Poller {
  private readonly busy = new Set<string>();
  /** Aborted when the daemon shuts down: every wait ends (answered with what is there). */
  private readonly closing = new AbortController();

  constructor(private readonly inbox: Inbox) {}

  receive(r: PollRequest): unknown[] | Promise<unknown[]> {
    const p = r.params;
    const timeout = p.timeout as number | undefined;
    const max = p.maxMessages as number | undefined;
    const name = (p.consumer as string | undefined) ?? r.defaultConsumer ?? POLL_CONSUMER;
    const bad = consumerNameError(name, r.knownConsumers);
    if (bad) throw new RpcFailure(RpcErrorCode.INVALID_PARAMS, `Invalid params: ${bad}`);
    // Accepted and nothing to do: nothing is downloaded when a message is received here.
    for (const flag of ['ignoreAttachments', 'ignoreAvatars', 'ignoreStickers']) optBool(p, flag);
    const ignoreStories = optBool(p, 'ignoreStories');
    if (r.receiving || this.busy.has(name)) throw userError(ALREADY_RECEIVING);
    const limit = max === undefined || max < 0 ? MAX_BATCH : Math.min(max, MAX_BATCH);
    if (limit === 0) return [];
    const take = () => this.take(name, limit, ignoreStories);
    const first = take();
    const waitMs =
      timeout === undefined ? DEFAULT_TIMEOUT_S * 1000 : timeout < 0 ? null : Math.min(timeout * 1000, MAX_WAIT_MS);
    if (first.length > 0 || waitMs === 0 || r.gone?.aborted) return first;
    this.busy.add(name);
    return this.wait(waitMs, r.gone).then(
      () => {
        this.busy.delete(name);
        return r.gone?.aborted ? [] : take();
      },
      (err: unknown) => {
        this.busy.delete(name);
        throw err;
      },
    );
  }

  /** What arrived after the consumer's mark (within the hold's bounds); the mark moves past it. */
  private take(name: string, limit: number, ignoreStories: boolean): unknown[] {
    const handle = this.inbox.consumer(name, false);
    try {
      const events = this.inbox.after(this.inbox.pollStart(name), limit, MAX_BATCH_BYTES);
      if (events.length === 0) return [];
      handle.wrote(events[events.length - 1]!.seq);
      const out = events.map((e) => JSON.parse(e.json) as { envelope: { storyMessage?: unknown } });
      // signal-cli's ignoreStories: story messages are not received (they are passed over for good).
      return ignoreStories ? out.filter((e) => e.envelope.storyMessage === undefined) : out;
    } finally {
      handle.close();
    }
  }

  /** Resolves when a message arrives, `ms` pass (null: never) or the caller goes. */
  private wait(ms: number | null, gone: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        this.inbox.off('appended', done);
        gone?.removeEventListener('abort', done);
        this.closing.signal.removeEventListener('abort', done);
        resolve();
      };
      if (ms !== null) timer = setTimeout(done, ms);
      this.inbox.on('appended', done);
      gone?.addEventListener('abort', done);
      if (this.closing.signal.aborted) done();
      else this.closing.signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Ends every wait under way, so a shutdown does not wait for pollers. */
  close(): void {
    this.closing.abort();
  }
}

/**
 * How the daemon answers a call: its own methods first (version, the receive subscriptions, the
 * `receive` poll), then the backend's, with the attachment checks before signal-cli reads a path
 * and a `send succeeded` record for each successful outbound send.
 */
import { fileParamPaths, type Logger, RpcErrorCode, SEND_SUCCEEDED_LOG } from '@vigil/shared-types';
import { type AttachmentPolicy, checkAttachmentPath } from './attachments.js';
import type { Backend } from './backend.js';
import { consumerNameError, POLL_CONSUMER, RELAY_CONSUMER } from './consumers.js';
import { RpcFailure, userError } from './errors.js';
import type { DaemonMetrics } from './metrics.js';
import { optInt, resolveParams } from './params.js';
import type { Poller } from './poll.js';
import type { Invoke } from './rpc.js';
import { checkSizes } from './sizes.js';
import type { TcpConnection } from './transports/tcp.js';
import { VERSION } from './version.js';

/** At info, at most one `send succeeded` record this often. */
const SEND_LOG_INTERVAL_MS = 60_000;
/** Methods whose success is an outbound send. */
const OUTBOUND = new Set(['send', 'sendReceipt', 'sendReaction', 'sendMessageRequestResponse']);

export interface DaemonCallsOptions {
  readonly backend: Backend;
  readonly poller: Poller;
  readonly knownConsumers: ReadonlySet<string>;
  readonly attachmentPolicy: AttachmentPolicy;
  readonly metrics: DaemonMetrics;
  readonly logger: Logger;
  /** Told the time of each successful outbound send. */
  readonly sent: (at: number) => void;
}

/** The `invoke` of a connection (null: an HTTP call, which has no connection). */
export function daemonCalls(o: DaemonCallsOptions): (conn: TcpConnection | null) => Invoke {
  const { backend, poller, knownConsumers } = o;
  const outbound = outboundRecorder(o);

  /**
   * Every file path in a call's params (signal-cli's file parameters: attachments, preview image,
   * a quote attachment's preview file, avatars, a sticker pack's path) must pass the attachment
   * checks before signal-cli reads it; a `data:` URI is no path.
   */
  const checkPaths = async (params: unknown): Promise<void> => {
    for (const { paths } of fileParamPaths(params)) {
      for (const path of paths) await checkAttachmentPath(path, o.attachmentPolicy);
    }
  };

  const callBackend = async (method: string, params: unknown): Promise<unknown> => {
    if (backend.state() === 'down') {
      throw new RpcFailure(RpcErrorCode.IO_ERROR, `The ${backend.kind} backend is not serving right now`);
    }
    checkSizes(params);
    // signal-cli reads attachment paths itself: they are checked here first.
    if (backend.kind === 'signal-cli') await checkPaths(params);
    const result = await backend.call(method, params);
    if (OUTBOUND.has(method)) outbound(method, result);
    return result;
  };

  return (conn) => (method, params, call) => {
    switch (method) {
      case 'version':
        // signal-cli's shape; the interface offered is in /api/v1/check's signalCliInterface.
        return { version: VERSION };
      case 'subscribeReceive': {
        if (!conn) break;
        // An optional consumer name (see consumers.ts): {"consumer":NAME}.
        const given = Array.isArray(params) ? undefined : resolveParams(method, params).consumer;
        const name = given ?? conn.defaultConsumer;
        const bad = consumerNameError(name, knownConsumers);
        if (bad) throw new RpcFailure(RpcErrorCode.INVALID_PARAMS, `Invalid params: ${bad}`);
        return conn.subscribe(name as string);
      }
      case 'receive':
        // Served from the inbox with either backend (see poll.ts): signal-cli receives continuously to fill it.
        return poller.receive({
          params: resolveParams(method, params),
          receiving: conn?.receiving ?? false,
          gone: call?.gone,
          knownConsumers,
          defaultConsumer: conn?.fromRelay ? RELAY_CONSUMER : POLL_CONSUMER,
        });
      case 'unsubscribeReceive': {
        if (!conn) break;
        // As signal-cli: the id as {"subscription":ID} or [ID]; missing or unknown is a user error (-1).
        const id = Array.isArray(params)
          ? optInt({ subscription: params[0] }, 'subscription')
          : optInt(resolveParams(method, params), 'subscription');
        if (id === undefined) throw userError('Missing subscription parameter with subscription id');
        if (!conn.unsubscribe(id)) throw userError('Unknown subscription id');
        return {};
      }
      default:
        if (backend.handles(method)) return callBackend(method, params);
    }
    throw new RpcFailure(RpcErrorCode.METHOD_NOT_FOUND, 'Method not implemented');
  };
}

/**
 * A successful outbound send is a `send succeeded` record (the health check reads them): every
 * one at debug; at info the first, then at most one a minute with the count since the last
 * (one line per send grew the log by ~100 MiB/h at 200 msg/s).
 */
function outboundRecorder(o: DaemonCallsOptions): (method: string, result: unknown) => void {
  let sendsUnlogged = 0;
  let sendLoggedAt = 0;
  return (method, result) => {
    const r = result as { timestamp?: number; results?: { type?: string }[] } | null;
    const results = Array.isArray(r?.results) ? r.results : [];
    const delivered = results.filter((x) => x.type === 'SUCCESS').length;
    if (results.length > 0 && delivered === 0) return;
    const now = Date.now();
    o.sent(now);
    o.metrics.sent.inc([method]);
    sendsUnlogged += 1;
    const record = { method, timestamp: r?.timestamp, recipients: results.length, delivered };
    if (now - sendLoggedAt >= SEND_LOG_INTERVAL_MS) {
      o.logger.info(SEND_SUCCEEDED_LOG, { ...record, sends: sendsUnlogged });
      sendLoggedAt = now;
      sendsUnlogged = 0;
    } else {
      o.logger.debug(SEND_SUCCEEDED_LOG, record);
    }
  };
}

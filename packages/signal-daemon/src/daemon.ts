import { dirname, join } from 'node:path';
import {
  canonicalOrigin,
  type DaemonStatus,
  fileParamPaths,
  formatHostPort,
  type HostPort,
  type Logger,
  RpcErrorCode,
  SEND_SUCCEEDED_LOG,
  VigilError,
} from '@vigil/shared-types';
import { closeServer, createServiceLogger, listen } from '@vigil/shared-types/node';
import winston from 'winston';
import { type AttachmentPolicy, checkAttachmentPath, resolveAllowedDirs } from './attachments.js';
import type { Backend } from './backend.js';
import { type DaemonConfig, type DaemonOptions, dataHome, resolveConfig } from './config.js';
import { BUILTIN_CONSUMERS, consumerNameError, POLL_CONSUMER, RELAY_CONSUMER, SSE_CONSUMER } from './consumers.js';
import { ConfigError, RpcFailure, userError } from './errors.js';
import { preparePrivateDir } from './files.js';
import { Inbox } from './inbox.js';
import { LocalBackend } from './localnet/backend.js';
import { DaemonMetrics, metricsServer } from './metrics.js';
import { optInt, resolveParams } from './params.js';
import { Poller } from './poll.js';
import { Dispatcher, type Invoke } from './rpc.js';
import { SignalCliBackend } from './signalcli/backend.js';
import { checkSizes } from './sizes.js';
import { isBusy, openDatabase } from './sqlite.js';
import { HttpTransport } from './transports/http.js';
import { type TcpConnection, TcpTransport } from './transports/tcp.js';
import { VERSION } from './version.js';

const PRUNE_INTERVAL_MS = 60_000;
/** At info, at most one `send succeeded` record this often. */
const SEND_LOG_INTERVAL_MS = 60_000;

const isIoFault = (err: unknown): boolean =>
  /^SQLITE_(IOERR|FULL)/.test(String((err as { code?: unknown } | null)?.code ?? ''));
/** Methods whose success is an outbound send. */
const OUTBOUND = new Set(['send', 'sendReceipt', 'sendReaction', 'sendMessageRequestResponse']);

export interface DaemonHandle {
  readonly config: DaemonConfig;
  /** The bound addresses (the real port when 0 was asked for), null for a listener that is off. */
  readonly http: HostPort | null;
  readonly tcp: HostPort | null;
  readonly metrics: HostPort | null;
  readonly inbox: Inbox;
  readonly backend: Backend;
  status(): DaemonStatus;
  /** Stops accepting, lets calls under way finish (bounded), closes streams and connections. */
  close(): Promise<void>;
}

/** Starts a daemon: its backend, inbox and listeners. Rejects with ConfigError or ListenError. */
export async function start(
  options: DaemonOptions & { logger?: Logger; sseKeepaliveMs?: number },
): Promise<DaemonHandle> {
  const logger = options.logger ?? createServiceLogger(winston, { level: 'info', service: 'signal-daemon' });
  const config = resolveConfig(options, logger);
  const startedAt = Date.now();
  const attachmentPolicy: AttachmentPolicy = {
    maxBytes: config.maxRequestBytes,
    allowedDirs: await resolveAllowedDirs(config.attachmentDirs),
  };
  try {
    preparePrivateDir(config.dataDir, dataHome(), true);
  } catch (err) {
    throw new ConfigError(`cannot create the data directory ${config.dataDir}: ${(err as Error).message}`);
  }
  const retention = { hours: config.retentionHours, messages: config.retentionMessages, bytes: config.retentionBytes };
  const hold = {
    enabled: config.hold,
    hours: config.holdHours,
    messages: config.holdMessages,
    bytes: config.holdBytes,
  };
  const knownConsumers: ReadonlySet<string> = new Set([...BUILTIN_CONSUMERS, ...config.consumers]);
  let inbox: Inbox | undefined;
  let backend: Backend;
  try {
    if (config.backend === 'local') {
      preparePrivateDir(dirname(config.localnet), dataHome());
      backend = new LocalBackend({
        account: config.account,
        profileName: config.profileName,
        localnet: config.localnet,
        synchronous: config.synchronous,
        dataDir: config.dataDir,
        linkTimeoutMs: config.linkTimeoutMs,
        retentionMs: config.localnetRetentionHours * 3_600_000,
        attachmentPolicy,
        logger,
        // The inbox lives in the network's file: a message moves from mailbox to inbox in one transaction.
        inbox: (db) => {
          inbox = new Inbox(db, config.account, retention, hold);
          return inbox;
        },
      });
    } else {
      inbox = new Inbox(
        openDatabase(join(config.dataDir, 'inbox.sqlite'), config.synchronous),
        config.account,
        retention,
        hold,
      );
      backend = new SignalCliBackend({
        ...config.signalCli,
        account: config.account,
        linkTimeoutMs: config.linkTimeoutMs,
        maxLineBytes: Math.max(config.maxRequestBytes, 64 * 1024 * 1024),
        inbox,
        logger,
      });
    }
  } catch (err) {
    const where =
      config.backend === 'local' ? `the local network ${config.localnet}` : `the inbox in ${config.dataDir}`;
    const message = `cannot open ${where}: ${(err as Error).message}`;
    // A lock held too long or a failing disk is a fault to retry (exit 1), not bad configuration.
    if (isBusy(err) || isIoFault(err)) throw new VigilError('ESTORE', message);
    throw new ConfigError(message);
  }
  const box = inbox!;
  box.prune();
  let lastInboundMessageAt: number | null = null;
  let lastOutboundSendAt: number | null = null;
  const metrics = new DaemonMetrics();
  let counted = box.head;
  box.on('appended', (head) => {
    lastInboundMessageAt = Date.now();
    metrics.received += Math.max(0, head - counted);
    counted = head;
  });
  box.on('replay', (missed) => {
    metrics.replays += 1;
    metrics.replayBacklog += missed;
  });
  const pruner = setInterval(() => {
    try {
      box.prune();
    } catch (err) {
      logger.warn('inbox retention failed', { error: String(err) });
    }
  }, PRUNE_INTERVAL_MS);
  pruner.unref();

  const dispatcher = new Dispatcher(logger, config.maxBatch);
  const poller = new Poller(box);

  /** Methods of the daemon itself (answered at once), then the backend's. */
  const invokeFor =
    (conn: TcpConnection | null): Invoke =>
    (method, params, call) => {
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

  /**
   * Every file path in a call's params (signal-cli's file parameters: attachments, preview image,
   * a quote attachment's preview file, avatars, a sticker pack's path) must pass the attachment
   * checks before signal-cli reads it; a `data:` URI is no path.
   */
  const checkPaths = async (params: unknown): Promise<void> => {
    for (const { paths } of fileParamPaths(params)) {
      for (const path of paths) await checkAttachmentPath(path, attachmentPolicy);
    }
  };

  /**
   * A successful outbound send is a `send succeeded` record (the health check reads them): every
   * one at debug; at info the first, then at most one a minute with the count since the last
   * (one line per send grew the log by ~100 MiB/h at 200 msg/s).
   */
  let sendsUnlogged = 0;
  let sendLoggedAt = 0;
  const outbound = (method: string, result: unknown) => {
    const r = result as { timestamp?: number; results?: { type?: string }[] } | null;
    const results = Array.isArray(r?.results) ? r.results : [];
    const delivered = results.filter((x) => x.type === 'SUCCESS').length;
    if (results.length > 0 && delivered === 0) return;
    const now = Date.now();
    lastOutboundSendAt = now;
    metrics.sent.inc([method]);
    sendsUnlogged += 1;
    const record = { method, timestamp: r?.timestamp, recipients: results.length, delivered };
    if (now - sendLoggedAt >= SEND_LOG_INTERVAL_MS) {
      logger.info(SEND_SUCCEEDED_LOG, { ...record, sends: sendsUnlogged });
      sendLoggedAt = now;
      sendsUnlogged = 0;
    } else {
      logger.debug(SEND_SUCCEEDED_LOG, record);
    }
  };

  const status = (): DaemonStatus => ({
    version: VERSION,
    signalCliInterface: backend.signalCliInterface(),
    account: config.account,
    backend: { kind: backend.kind, state: backend.state() },
    uptimeS: Math.round((Date.now() - startedAt) / 1000),
    consumers: {
      sse: http?.streams.size ?? 0,
      tcp: tcp?.connections.size ?? 0,
      list: box
        .consumerStates([SSE_CONSUMER, ...config.consumers])
        .map(({ name, connections, held, oldestHeldAgeS, lastSeenAt }) => ({
          name,
          connected: connections > 0,
          connections,
          held,
          oldestHeldAgeS,
          lastSeenAt,
        })),
    },
    lastOutboundSendAt,
    lastInboundMessageAt,
  });

  const http = config.http
    ? new HttpTransport({
        bindHost: config.http.host,
        allowOrigins: new Set(config.allowOrigins.map((o) => canonicalOrigin(o)!)),
        maxRequestBytes: config.maxRequestBytes,
        maxStreams: config.maxConnections,
        keepaliveMs: options.sseKeepaliveMs,
        inbox: box,
        consumers: knownConsumers,
        dispatcher,
        invoke: metrics.count(invokeFor(null), 'http'),
        serving: () => backend.state() === 'serving' && !backend.fault?.(),
        status,
        logger,
      })
    : null;
  const tcp = config.tcp
    ? new TcpTransport({
        maxLineBytes: config.maxRequestBytes,
        maxConnections: config.maxConnections,
        maxConnectionsPerSource: config.maxConnectionsPerSource,
        idleTimeoutMs: config.tcpIdleTimeoutMs,
        receiveMode: config.receiveMode,
        inbox: box,
        relaySources: new Set(config.relaySources),
        dispatcher,
        invoke: (conn) => metrics.count(invokeFor(conn), 'tcp'),
        logger,
      })
    : null;

  const gauges = () => ({ status: status(), inboxSize: box.size, inboxBytes: box.bytes, inboxHead: box.head });
  const metricsSrv = config.metrics ? metricsServer(config.metrics.host, () => metrics.render(gauges()), logger) : null;

  let httpAddr: HostPort | null = null;
  let tcpAddr: HostPort | null = null;
  let metricsAddr: HostPort | null = null;
  try {
    if (http && config.http) httpAddr = await listen(http.server, config.http, 'HTTP');
    if (tcp && config.tcp) tcpAddr = await listen(tcp.server, config.tcp, 'TCP');
    if (metricsSrv && config.metrics) metricsAddr = await listen(metricsSrv, config.metrics, 'metrics');
  } catch (err) {
    clearInterval(pruner);
    if (http) await closeServer(http.server);
    if (tcp) await closeServer(tcp.server);
    if (metricsSrv) await closeServer(metricsSrv);
    await backend.close();
    throw err;
  }

  logger.info('listening', {
    account: config.account,
    backend: backend.kind,
    http: httpAddr ? formatHostPort(httpAddr) : 'off',
    tcp: tcpAddr ? formatHostPort(tcpAddr) : 'off',
    metrics: metricsAddr ? formatHostPort(metricsAddr) : 'off',
    receiveMode: config.receiveMode,
    ...(config.backend === 'local' ? { localnet: config.localnet } : { signalCli: config.signalCli.program }),
    dataDir: config.dataDir,
    pid: process.pid,
    version: VERSION,
  });

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      clearInterval(pruner);
      // Stop accepting; connections already open stay until their calls are done.
      const closed = [http && closeServer(http.server), tcp && closeServer(tcp.server)];
      if (metricsSrv) {
        closed.push(closeServer(metricsSrv));
        metricsSrv.closeAllConnections();
      }
      poller.close();
      await dispatcher.drain(config.shutdownGraceMs);
      http?.closeStreams();
      tcp?.closeConnections();
      http?.server.closeAllConnections();
      await Promise.all(closed);
      box.close();
      await backend.close();
      logger.info('stopped', { account: config.account, unfinishedCalls: dispatcher.inFlight });
    })();
    return closing;
  };

  return { config, http: httpAddr, tcp: tcpAddr, metrics: metricsAddr, inbox: box, backend, status, close };
}

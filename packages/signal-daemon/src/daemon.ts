import { dirname, join } from 'node:path';
import { canonicalOrigin, type DaemonStatus, type HostPort, type Logger } from '@vigil/shared-types';
import { createServiceLogger, listenField, ServiceLifecycle, type ServiceState } from '@vigil/shared-types/node';
import winston from 'winston';
import { type AttachmentPolicy, resolveAllowedDirs } from './attachments.js';
import type { Backend } from './backend.js';
import { type DaemonConfig, type DaemonOptions, dataHome, resolveConfig } from './config.js';
import { BUILTIN_CONSUMERS, SSE_CONSUMER } from './consumers.js';
import { daemonCalls } from './daemon-calls.js';
import { ConfigError, StoreError } from './errors.js';
import { preparePrivateDir } from './files.js';
import { Inbox } from './inbox.js';
import { LocalBackend } from './localnet/backend.js';
import { adoptInbox } from './localnet/inbox-move.js';
import { DaemonMetrics, metricsServer } from './metrics.js';
import { Poller } from './poll.js';
import { Dispatcher, type Invoke } from './rpc.js';
import { SignalCliBackend } from './signalcli/backend.js';
import { isBusy, openDatabase } from './sqlite.js';
import { HttpTransport } from './transports/http.js';
import { type TcpConnection, TcpTransport } from './transports/tcp.js';
import { VERSION } from './version.js';

const PRUNE_INTERVAL_MS = 60_000;

const isIoFault = (err: unknown): boolean =>
  /^SQLITE_(IOERR|FULL)/.test(String((err as { code?: unknown } | null)?.code ?? ''));

export interface DaemonHandle {
  readonly config: DaemonConfig;
  /** The bound addresses (the real port when 0 was asked for), null for a listener that is off. */
  readonly http: HostPort | null;
  readonly tcp: HostPort | null;
  readonly metrics: HostPort | null;
  readonly inbox: Inbox;
  readonly backend: Backend;
  status(): DaemonStatus;
  /** Where the daemon is in its life (see shared-types lifecycle.ts). */
  state(): ServiceState;
  /** Stops accepting, lets calls under way finish (bounded), closes streams and connections. */
  close(): Promise<void>;
}

/**
 * The inbox: `inbox.sqlite` in the data directory, for either backend (an inbox that an older
 * version kept in the local network's file is moved here first). A failure is said in an
 * operator's words: a lock held too long or a failing disk is a fault to retry (exit 1), anything
 * else bad configuration (exit 78).
 */
function openInbox(config: DaemonConfig, logger: Logger): Inbox {
  const retention = { hours: config.retentionHours, messages: config.retentionMessages, bytes: config.retentionBytes };
  const hold = {
    enabled: config.hold,
    hours: config.holdHours,
    messages: config.holdMessages,
    bytes: config.holdBytes,
  };
  const where = `the inbox in ${config.dataDir}`;
  const db = opening(where, () => openDatabase(join(config.dataDir, 'inbox.sqlite'), config.synchronous));
  try {
    if (config.backend === 'local') {
      const moved = opening(`the local network ${config.localnet}`, () =>
        adoptInbox(db, config.localnet, config.account),
      );
      if (moved > 0) logger.info('moved the inbox out of the local network file', { messages: moved });
    }
    return opening(where, () => new Inbox(db, config.account, retention, hold));
  } catch (err) {
    db.close();
    throw err;
  }
}

function openBackend(config: DaemonConfig, inbox: Inbox, logger: Logger, attachmentPolicy: AttachmentPolicy): Backend {
  if (config.backend === 'signal-cli') {
    return new SignalCliBackend({
      ...config.signalCli,
      account: config.account,
      linkTimeoutMs: config.linkTimeoutMs,
      maxLineBytes: Math.max(config.maxRequestBytes, 64 * 1024 * 1024),
      inbox,
      logger,
    });
  }
  return opening(`the local network ${config.localnet}`, () => {
    preparePrivateDir(dirname(config.localnet), dataHome());
    return new LocalBackend({
      account: config.account,
      profileName: config.profileName,
      localnet: config.localnet,
      synchronous: config.synchronous,
      dataDir: config.dataDir,
      linkTimeoutMs: config.linkTimeoutMs,
      retentionMs: config.localnetRetentionHours * 3_600_000,
      attachmentPolicy,
      logger,
      inbox,
    });
  });
}

/** Runs `open`; a failure is a StoreError (a lock held too long, a failing disk) or a ConfigError. */
function opening<T>(what: string, open: () => T): T {
  try {
    return open();
  } catch (err) {
    const message = `cannot open ${what}: ${(err as Error).message}`;
    if (isBusy(err) || isIoFault(err)) throw new StoreError(message);
    throw new ConfigError(message);
  }
}

/** The times of the last message in and the last send out, and the inbox's counts in the metrics. */
function watchInbox(box: Inbox, metrics: DaemonMetrics) {
  const activity = { lastInboundMessageAt: null as number | null, lastOutboundSendAt: null as number | null };
  let counted = box.head;
  box.on('appended', (head) => {
    activity.lastInboundMessageAt = Date.now();
    metrics.received += Math.max(0, head - counted);
    counted = head;
  });
  box.on('replay', (missed) => {
    metrics.replays += 1;
    metrics.replayBacklog += missed;
  });
  return activity;
}

/** The daemon's status (GET /api/v1/check with JSON, the metrics' gauges). */
function daemonStatus(
  config: DaemonConfig,
  backend: Backend,
  box: Inbox,
  activity: { lastInboundMessageAt: number | null; lastOutboundSendAt: number | null },
  listeners: { http: HttpTransport | null; tcp: TcpTransport | null },
  metrics: DaemonMetrics,
): () => DaemonStatus {
  const startedAt = Date.now();
  return () => ({
    version: VERSION,
    signalCliInterface: backend.signalCliInterface(),
    account: config.account,
    backend: { kind: backend.kind, state: backend.state() },
    uptimeS: Math.round((Date.now() - startedAt) / 1000),
    consumers: {
      sse: listeners.http?.streams.size ?? 0,
      tcp: listeners.tcp?.connections.size ?? 0,
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
    lastOutboundSendAt: activity.lastOutboundSendAt,
    lastInboundMessageAt: activity.lastInboundMessageAt,
    messages: { sent: metrics.sentTotal(), received: metrics.received },
  });
}

/** The HTTP and TCP transports the configuration asks for (null: off); not listening yet. */
function openTransports(
  config: DaemonConfig,
  o: {
    keepaliveMs: number | undefined;
    inbox: Inbox;
    consumers: ReadonlySet<string>;
    dispatcher: Dispatcher;
    invokeFor: (conn: TcpConnection | null, transport: 'http' | 'tcp') => Invoke;
    serving: () => boolean;
    status: () => DaemonStatus;
    logger: Logger;
  },
): { http: HttpTransport | null; tcp: TcpTransport | null } {
  const http = config.http
    ? new HttpTransport({
        bindHost: config.http.host,
        allowOrigins: new Set(config.allowOrigins.map((origin) => canonicalOrigin(origin)!)),
        maxRequestBytes: config.maxRequestBytes,
        maxStreams: config.maxConnections,
        keepaliveMs: o.keepaliveMs,
        inbox: o.inbox,
        consumers: o.consumers,
        dispatcher: o.dispatcher,
        invoke: o.invokeFor(null, 'http'),
        serving: o.serving,
        status: o.status,
        logger: o.logger,
      })
    : null;
  const tcp = config.tcp
    ? new TcpTransport({
        maxLineBytes: config.maxRequestBytes,
        maxConnections: config.maxConnections,
        maxConnectionsPerSource: config.maxConnectionsPerSource,
        idleTimeoutMs: config.tcpIdleTimeoutMs,
        receiveMode: config.receiveMode,
        inbox: o.inbox,
        relaySources: new Set(config.relaySources),
        dispatcher: o.dispatcher,
        invoke: (conn) => o.invokeFor(conn, 'tcp'),
        logger: o.logger,
      })
    : null;
  return { http, tcp };
}

/**
 * Starts a daemon: its backend and inbox, then its listeners (see shared-types lifecycle.ts for
 * the order of opening and closing). Rejects with ConfigError or ListenError.
 */
export async function start(
  options: DaemonOptions & { logger?: Logger; sseKeepaliveMs?: number; onState?: (state: ServiceState) => void },
): Promise<DaemonHandle> {
  const logger = options.logger ?? createServiceLogger(winston, { level: 'info', service: 'signal-daemon' });
  const config = resolveConfig(options, logger);
  const attachmentPolicy: AttachmentPolicy = {
    maxBytes: config.maxRequestBytes,
    allowedDirs: await resolveAllowedDirs(config.attachmentDirs),
  };
  try {
    preparePrivateDir(config.dataDir, dataHome(), true);
  } catch (err) {
    throw new ConfigError(`cannot create the data directory ${config.dataDir}: ${(err as Error).message}`);
  }
  const life = new ServiceLifecycle({ logger, graceMs: config.shutdownGraceMs, onState: options.onState });
  // Closed in reverse order: the consumers' marks are written, the backend stops, the file closes.
  const inbox = await life.open(
    'inbox file',
    () => openInbox(config, logger),
    (b) => b.db.close(),
  );
  // The backend's close bounds itself: signal-cli gets SIGTERM, SIGKILL after its stop timeout, and
  // the daemon exits only once it is gone.
  const backend = await life.open(
    'backend',
    () => openBackend(config, inbox, logger, attachmentPolicy),
    (b) => b.close(),
    Number.POSITIVE_INFINITY,
  );
  const box = life.own('inbox', inbox, (b) => b.close());
  const prune = () =>
    box.prune().catch((err: unknown) => logger.warn('inbox retention failed', { error: String(err) }));
  void prune();
  const metrics = new DaemonMetrics();
  const activity = watchInbox(box, metrics);
  const pruner = setInterval(prune, PRUNE_INTERVAL_MS);
  pruner.unref();
  life.own('inbox retention', pruner, clearInterval);

  const knownConsumers: ReadonlySet<string> = new Set([...BUILTIN_CONSUMERS, ...config.consumers]);
  const dispatcher = new Dispatcher(logger, config.maxBatch);
  const poller = new Poller(box);
  const invokeFor = daemonCalls({
    backend,
    poller,
    knownConsumers,
    attachmentPolicy,
    metrics,
    logger,
    sent: (at) => {
      activity.lastOutboundSendAt = at;
    },
  });

  const listeners: { http: HttpTransport | null; tcp: TcpTransport | null } = { http: null, tcp: null };
  const status = daemonStatus(config, backend, box, activity, listeners, metrics);

  const { http, tcp } = Object.assign(
    listeners,
    openTransports(config, {
      keepaliveMs: options.sseKeepaliveMs,
      inbox: box,
      consumers: knownConsumers,
      dispatcher,
      invokeFor: (conn, transport) => metrics.count(invokeFor(conn), transport),
      serving: () => backend.state() === 'serving' && !backend.fault?.(),
      status,
      logger,
    }),
  );
  const gauges = () => ({ status: status(), inboxSize: box.size, inboxBytes: box.bytes, inboxHead: box.head });
  const metricsSrv = config.metrics ? metricsServer(config.metrics.host, () => metrics.render(gauges()), logger) : null;

  const [httpAddr = null, tcpAddr = null, metricsAddr = null] = await life.listen([
    http && config.http ? { what: 'HTTP', server: http.server, addr: config.http } : null,
    tcp && config.tcp ? { what: 'TCP', server: tcp.server, addr: config.tcp } : null,
    metricsSrv && config.metrics
      ? { what: 'metrics', server: metricsSrv, addr: config.metrics, cutAtStop: true }
      : null,
  ]);
  life.onStop({
    // Long polls end at once; calls under way get the grace; then streams and connections go.
    stopAccepting: () => poller.close(),
    drain: (graceMs) => dispatcher.drain(graceMs),
    cut: () => {
      http?.closeStreams();
      tcp?.closeConnections();
    },
    stopping: () => ({ account: config.account, inFlight: dispatcher.inFlight }),
    stopped: () => ({ account: config.account, unfinishedCalls: dispatcher.inFlight }),
  });
  life.listening({
    account: config.account,
    backend: backend.kind,
    http: listenField(httpAddr),
    tcp: listenField(tcpAddr),
    metrics: listenField(metricsAddr),
    receiveMode: config.receiveMode,
    ...(config.backend === 'local' ? { localnet: config.localnet } : { signalCli: config.signalCli.program }),
    dataDir: config.dataDir,
    pid: process.pid,
    version: VERSION,
  });
  life.serving();

  return {
    config,
    http: httpAddr,
    tcp: tcpAddr,
    metrics: metricsAddr,
    inbox: box,
    backend,
    status,
    state: () => life.state,
    close: () => life.stop(),
  };
}

/**
 * The inference server's lifecycle: `start(options)` checks the configuration, the manifest and
 * the model file, binds its listeners (plain HTTP and mutual TLS, same routes), then loads the
 * model in the background: /health and /v1/models answer while it loads.
 *
 * Why it cannot hang (spec 3.4): every completion has a deadline (`requestTimeoutMs`, queueing
 * included) after which it is answered with an error whether or not the native generation lets
 * go; a client that leaves aborts its generation; the queue is bounded; on close the listeners
 * stop accepting at once, in-flight work gets a bounded grace and is then aborted, requests that
 * arrive on open connections meanwhile get 503, and every step after the grace is time-bounded.
 */
import { formatHostPort, type HostPort } from '@vigil/shared-types';
import { closeServer } from '@vigil/shared-types/node';
import { requestLog } from './access-log.js';
import { lowerWorkerThreadPriority } from './adaptive-threads.js';
import { DEFAULTS, resolveConfig, type ServerConfig, type ServerOptions } from './config.js';
import type { ServerContext, ServerState } from './context.js';
import { Engine } from './engine.js';
import { EndReason, StartupError } from './errors.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { checkManifest, checkModelFile, openAccessLog, openListeners, readTlsFiles } from './preflight.js';
import { ProgressTracker } from './progress.js';
import { createHandler } from './routes.js';
import { Scheduler } from './scheduler.js';
import { VERSION } from './version.js';

export type { ServerState } from './context.js';

export interface ServerHandle {
  readonly config: ServerConfig;
  /** Bound addresses (the real port when 0 was asked for); null for a listener that is off. */
  readonly http: HostPort | null;
  readonly mtls: HostPort | null;
  /** Resolves when the model is loaded and completions can be served; rejects if loading fails. */
  readonly ready: Promise<void>;
  state(): ServerState;
  /** Completions running and waiting. */
  load(): { active: number; waiting: number; stuck: number };
  /** Why the model is not making progress on work it has (see progress.ts); null: it is, or has none. */
  stalled(): string | null;
  /**
   * Stops accepting, lets in-flight completions finish within the grace (default: the
   * configured one), aborts the rest, disposes the model. Every step is time-bounded.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * One warn line when the model stalls (a slot past its bound), one info line when it moves again:
 * checked every second.
 */
function watchStalls(progress: ProgressTracker, logger: Logger): NodeJS.Timeout {
  let episode: string | null = null;
  const t = setInterval(() => {
    const r = progress.report();
    if (r.reason !== null && episode === null) logger.warn('stalled', { reason: r.reason, in_flight: r.in_flight });
    else if (r.reason === null && episode !== null) logger.info('progressing again', { in_flight: r.in_flight });
    episode = r.reason;
  }, 1000);
  t.unref();
  return t;
}

/** A sleep that does not hold the event loop. */
const unrefSleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

/** Waits until `cond()` holds, at most `ms` (unref'd timers). */
async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await unrefSleep(Math.min(20, Math.max(1, deadline - Date.now())));
}

/** Starts the server. Rejects with ConfigError (exit 78), StartupError or ListenError (exit 1). */
export async function start(options: ServerOptions & { stuckAfterMs?: number }): Promise<ServerHandle> {
  const logger: Logger = options.logger ?? createLogger({ level: 'info', service: 'inference-server' });
  const config = resolveConfig(options, logger);

  // Integrity first: nothing is served from a model that fails its manifest.
  await checkManifest(config, logger);
  await checkModelFile(config.model);
  const tls = await readTlsFiles(config);
  const accessLog = openAccessLog(config);

  let state: ServerState = 'loading';
  let engine: Engine | null = null;
  const metrics = new Metrics();
  const progress = new ProgressTracker({ stallAfterMs: config.stallAfterMs, minPromptRate: config.minPromptRate });
  const log = requestLog(accessLog);
  const ctx: ServerContext = {
    config,
    logger,
    scheduler: new Scheduler(config.parallel, config.maxQueue, options.stuckAfterMs),
    inFlight: new Set(),
    responses: { open: 0 },
    access: (req, listener, startedNs, status, extra, msg) => {
      const seconds = Number(process.hrtime.bigint() - startedNs) / 1e9;
      metrics.request((req.url ?? '/').split('?')[0] ?? '/', status, listener, seconds);
      log(req, listener, startedNs, status, extra, msg);
    },
    metrics,
    progress,
    state: () => state,
    engine: () => engine,
  };
  const { scheduler, inFlight } = ctx;

  let listeners: Awaited<ReturnType<typeof openListeners>>;
  try {
    listeners = await openListeners(config, tls, (listener) => createHandler(ctx, listener), logger);
  } catch (err) {
    await accessLog?.close();
    throw err;
  }
  const { servers } = listeners;

  logger.info('listening', {
    http: listeners.http ? formatHostPort(listeners.http) : 'off',
    mtls: listeners.mtls ? formatHostPort(listeners.mtls) : 'off',
    model: config.model,
    modelIds: config.modelIds,
    parallel: config.parallel,
    threads: config.threads,
    batchThreads: config.batchThreads,
    maxQueue: config.maxQueue,
    pid: process.pid,
    version: VERSION,
  });

  const loadAbort = new AbortController();
  const loadStarted = Date.now();
  const ready = Engine.load({
    modelPath: config.model,
    gpu: config.gpu,
    threads: config.threads,
    batchThreads: config.batchThreads,
    parallel: config.parallel,
    contextSize: config.contextSize,
    maxDefaultContextSize: DEFAULTS.maxDefaultContextSize,
    stateCache: { dir: config.stateCacheDir, maxBytes: config.stateCacheMib * 1024 * 1024 },
    logger,
    signal: loadAbort.signal,
    grammar: {
      timeoutMs: config.grammarTimeoutMs,
      memoryMb: config.grammarMemoryMb,
      maxWaiting: config.maxQueue + config.parallel,
      cacheBytes: config.grammarCacheBytes,
    },
    progress,
  }).then(
    async (e) => {
      if (state !== 'loading') {
        await e.dispose();
        throw new StartupError('VIGIL_ERR_INFERENCE_STOPPED', 'stopped while the model was loading');
      }
      engine = e;
      state = 'ready';
      const lowered = config.workerNice > 0 ? lowerWorkerThreadPriority(Math.min(19, config.workerNice)) : 0;
      logger.info('model loaded', {
        model: config.model,
        load_ms: Date.now() - loadStarted,
        contextSize: e.info.contextSize,
        trainContextSize: e.info.trainContextSize,
        gpu: e.info.gpu,
        threads: e.info.threads,
        batchThreads: e.info.adaptiveThreads ? e.info.batchThreads : e.info.threads,
        workerThreadsLowered: lowered,
        parallel: config.parallel,
        chatWrapper: e.info.chatWrapper,
        stateCacheMib: e.states ? config.stateCacheMib : 0,
      });
    },
    (err: Error) => {
      if (state === 'loading') state = 'failed';
      throw new StartupError('VIGIL_ERR_INFERENCE_LOAD', err.message);
    },
  );
  ready.catch(() => {});
  const stallWatch = watchStalls(progress, logger);

  /** The shutdown itself; close() runs it once, holding the event loop until it ends. */
  const shutdown = async (graceMs: number) => {
    const wasLoading = state === 'loading';
    state = 'stopping';
    clearInterval(stallWatch);
    logger.info('stopping', { inFlight: inFlight.size, graceMs });
    // Stop accepting at once; idle keep-alive connections go now, busy ones after their reply.
    const closed = servers.map(closeServer);
    for (const s of servers) s.closeIdleConnections();
    if (wasLoading) loadAbort.abort(new Error('stopping'));
    await waitUntil(() => inFlight.size === 0, graceMs);
    const unfinished = inFlight.size;
    const reason = new EndReason('shutdown', 'The server is shutting down; the completion was stopped.');
    for (const abort of [...inFlight]) abort(reason);
    scheduler.rejectAll(reason);
    // Let the error replies and final stream events go out, then drop every connection.
    await waitUntil(() => ctx.responses.open === 0, 300);
    logger.debug('shutdown: replies sent', { openResponses: ctx.responses.open });
    for (const s of servers) s.closeAllConnections();
    await Promise.race([Promise.all(closed), unrefSleep(300)]);
    logger.debug('shutdown: listeners closed');
    // A generation that does not let go must not hold the exit: disposal is bounded too.
    const eng = engine as Engine | null;
    if (eng) await Promise.race([eng.dispose(), unrefSleep(700)]);
    else if (wasLoading) await Promise.race([ready.catch(() => {}), unrefSleep(700)]);
    logger.debug('shutdown: model disposed');
    listeners.refusals.flush();
    await Promise.race([accessLog?.close(), unrefSleep(200)]);
    state = 'stopped';
    logger.info('stopped', { aborted: unfinished });
  };

  let closing: Promise<void> | null = null;
  const close = (graceMs = config.shutdownGraceMs) => {
    closing ??= (async () => {
      // The waits below use unref'd timers: once the listeners and connections are closed nothing
      // else may hold the event loop, and the process would end in the middle of the shutdown
      // (before the model is disposed, the access log flushed and `stopped` logged). This does.
      const hold = setInterval(() => {}, 1000);
      try {
        await shutdown(graceMs);
      } finally {
        clearInterval(hold);
      }
    })();
    return closing;
  };

  return {
    config,
    http: listeners.http,
    mtls: listeners.mtls,
    ready,
    state: () => state,
    load: () => ({ active: scheduler.active, waiting: scheduler.waiting, stuck: scheduler.stuck() }),
    stalled: () => (state === 'ready' ? progress.report().reason : null),
    close,
  };
}

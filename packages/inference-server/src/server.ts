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
import type { HostPort } from '@vigil/shared-types';
import { listenField, ServiceLifecycle, type ServiceState, waitUntil } from '@vigil/shared-types/node';
import { requestLog } from './access-log.js';
import { DEFAULTS, resolveConfig, type ServerConfig, type ServerOptions } from './config.js';
import type { ServerContext, ServerState } from './context.js';
import { Engine } from './engine.js';
import { EndReason, StartupError } from './errors.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import {
  checkManifest,
  checkModelFile,
  createServers,
  openAccessLog,
  protectListeners,
  readTlsFiles,
} from './preflight.js';
import { ProgressTracker } from './progress.js';
import { createHandler } from './routes.js';
import { Scheduler } from './scheduler.js';
import { VERSION } from './version.js';
import { applyWorkerPriority, CpuWaitWatch, idleThreadsCpu, type WorkerPriority } from './worker-priority.js';

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
function watchStalls(progress: ProgressTracker, logger: Logger, idleThreads: () => boolean): NodeJS.Timeout {
  let episode: string | null = null;
  const cpuWait = new CpuWaitWatch();
  const t = setInterval(() => {
    // SCHED_IDLE threads waiting for a CPU the host's other work holds: not a stall (worker-priority.ts).
    const w = idleThreads() ? cpuWait.sample(idleThreadsCpu()) : null;
    progress.cpuWait({ waited: w?.waiting === true, episode: cpuWait.since !== null });
    if (w?.began) logger.warn('generation waiting for CPU', { policy: 'idle', hint: HOST_BUSY });
    if (w?.endedAfterMs != null)
      logger.info('generation has CPU again', { waited_s: Math.round(w.endedAfterMs / 1000) });
    const r = progress.report();
    if (r.reason !== null && episode === null) logger.warn('stalled', { reason: r.reason, in_flight: r.in_flight });
    else if (r.reason === null && episode !== null) logger.info('progressing again', { in_flight: r.in_flight });
    episode = r.reason;
  }, 1000);
  t.unref();
  return t;
}

const HOST_BUSY =
  "the host's other work holds every core; the model runs at SCHED_IDLE and waits (not counted as a stall). --worker-sched normal shares the CPU instead";

/** Loads the model in the background; resolves with the engine (see Engine.load). */
function loadEngine(config: ServerConfig, logger: Logger, progress: ProgressTracker, signal: AbortSignal) {
  return Engine.load({
    modelPath: config.model,
    gpu: config.gpu,
    threads: config.threads,
    batchThreads: config.batchThreads,
    parallel: config.parallel,
    contextSize: config.contextSize,
    maxDefaultContextSize: DEFAULTS.maxDefaultContextSize,
    stateCache: { dir: config.stateCacheDir, maxBytes: config.stateCacheMib * 1024 * 1024 },
    logger,
    signal,
    grammar: {
      timeoutMs: config.grammarTimeoutMs,
      memoryMb: config.grammarMemoryMb,
      maxWaiting: config.maxQueue + config.parallel,
      cacheBytes: config.grammarCacheBytes,
    },
    progress,
  });
}

/** The `model loaded` line. */
async function logLoaded(config: ServerConfig, logger: Logger, e: Engine, loadMs: number): Promise<WorkerPriority> {
  const priority = await applyWorkerPriority(config.workerSched, config.workerNice);
  if (priority.idleRefused) logger.warn('worker threads left at normal priority', { reason: priority.idleRefused });
  logger.info('model loaded', {
    model: config.model,
    load_ms: loadMs,
    contextSize: e.info.contextSize,
    trainContextSize: e.info.trainContextSize,
    gpu: e.info.gpu,
    threads: e.info.threads,
    batchThreads: e.info.adaptiveThreads ? e.info.batchThreads : e.info.threads,
    workerThreadsLowered: priority.lowered,
    workerThreadsIdle: priority.idle,
    parallel: config.parallel,
    chatWrapper: e.info.chatWrapper,
    llamaBuild: e.info.buildType,
    stateCacheMib: e.states ? config.stateCacheMib : 0,
  });
  return priority;
}

/**
 * Starts the server (see shared-types lifecycle.ts for the order of opening and closing).
 * Rejects with ConfigError (exit 78), StartupError or ListenError (exit 1).
 */
export async function start(
  options: ServerOptions & { stuckAfterMs?: number; onState?: (state: ServiceState) => void },
): Promise<ServerHandle> {
  const logger: Logger = options.logger ?? createLogger({ level: 'info', service: 'inference-server' });
  const config = resolveConfig(options, logger);

  // Integrity first: nothing is served from a model that fails its manifest.
  await checkManifest(config, logger);
  await checkModelFile(config.model);
  const tls = await readTlsFiles(config);
  // The waits of the stop after the drain are short: the CLI's last resort exits 1.8 s after the grace.
  const life = new ServiceLifecycle({ logger, graceMs: config.shutdownGraceMs, stepMs: 300, onState: options.onState });
  const accessLog = life.own('access log', openAccessLog(config), (l) => l?.close(), 200);

  let engine: Engine | null = null;
  let failed = false;
  const state = (): ServerState =>
    life.state === 'serving' ? 'ready' : failed && life.state === 'loading' ? 'failed' : life.state;
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
    state,
    engine: () => engine,
  };
  const { scheduler, inFlight } = ctx;

  const handler = (listener: 'http' | 'mtls') => createHandler(ctx, listener);
  const servers = await life.open(
    'listeners',
    () => createServers(config, tls, handler, logger),
    (s) => s.refusals.flush(),
  );
  const [http = null, mtls = null] = await life.listen([
    servers.http && config.http ? { what: 'HTTP', server: servers.http, addr: config.http } : null,
    servers.mtls && config.mtls ? { what: 'mTLS', server: servers.mtls, addr: config.mtls } : null,
  ]);
  protectListeners(servers, config);
  life.listening({
    http: listenField(http),
    mtls: listenField(mtls),
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
  let idleThreads = false;
  const ready = loadEngine(config, logger, progress, loadAbort.signal).then(
    async (e) => {
      if (life.state !== 'loading') {
        await e.dispose();
        throw new StartupError('VIGIL_ERR_INFERENCE_STOPPED', 'stopped while the model was loading');
      }
      engine = life.own('model', e, (m) => m.dispose(), 700);
      life.serving();
      idleThreads = (await logLoaded(config, logger, e, Date.now() - loadStarted)).idle > 0;
    },
    (err: Error) => {
      failed = true;
      throw new StartupError('VIGIL_ERR_INFERENCE_LOAD', err.message);
    },
  );
  ready.catch(() => {});
  // Stopped while loading: the load is aborted, and waited for (bounded) before the exit.
  life.own('model load', ready, (r) => r.catch(() => {}), 700);
  life.own(
    'stall watch',
    watchStalls(progress, logger, () => idleThreads),
    clearInterval,
  );

  let unfinished = 0;
  life.onStop({
    stopping: () => ({ inFlight: inFlight.size }),
    stopAccepting: () => {
      if (engine === null) loadAbort.abort(new Error('stopping'));
    },
    drain: (graceMs) => waitUntil(() => inFlight.size === 0, graceMs),
    cut: async () => {
      unfinished = inFlight.size;
      const reason = new EndReason('shutdown', 'The server is shutting down; the completion was stopped.');
      for (const abort of [...inFlight]) abort(reason);
      scheduler.rejectAll(reason);
      // Let the error replies and final stream events go out (within the 300 ms of the step); then
      // every connection is dropped.
      await waitUntil(() => ctx.responses.open === 0, 250);
    },
    stopped: () => ({ aborted: unfinished }),
  });

  return {
    config,
    http,
    mtls,
    ready,
    state,
    load: () => ({ active: scheduler.active, waiting: scheduler.waiting, stuck: scheduler.stuck() }),
    stalled: () => (state() === 'ready' ? progress.report().reason : null),
    close: (graceMs = config.shutdownGraceMs) => life.stop(graceMs),
  };
}

/**
 * The inference server: `start(options)` checks the configuration, the manifest and the model
 * file, binds its listeners (plain HTTP and mutual TLS, same routes), then loads the model in
 * the background: /health and /v1/models answer while it loads.
 *
 * Why it cannot hang (spec 3.4): every completion has a deadline (`requestTimeoutMs`, queueing
 * included) after which it is answered with an error whether or not the native generation lets
 * go; a client that leaves aborts its generation; the queue is bounded; on close the listeners
 * stop accepting at once, in-flight work gets a bounded grace and is then aborted, requests that
 * arrive on open connections meanwhile get 503, and every step after the grace is time-bounded.
 */
import { openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  formatHostPort,
  type HostPort,
  INFERENCE_PATHS,
  isLoopbackHost,
  isWildcardHost,
  PRIMARY_SUCCESS_MARKER,
} from '@vigil/shared-types';
import { AccessLog } from './access-log.js';
import { DEFAULTS, resolveConfig, type ServerConfig, type ServerOptions } from './config.js';
import { ContextLengthError, Engine, lowerWorkerThreadPriority } from './engine.js';
import { ConfigError, ListenError, StartupError } from './errors.js';
import { checkModelSummary, GgufError, readGgufSummary } from './gguf.js';
import { createLogger, type Logger } from './logger.js';
import { ManifestError, verifyManifest } from './manifest.js';
import {
  ApiError,
  type CompletionRequest,
  chunk,
  completionBody,
  completionId,
  invalid,
  modelList,
  modelNotFound,
  parseCompletionRequest,
  usage,
  usageChunk,
} from './openai.js';
import { QueueFullError, Scheduler } from './scheduler.js';
import { VERSION } from './version.js';

export type ServerState = 'loading' | 'ready' | 'failed' | 'stopping' | 'stopped';

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
  /**
   * Stops accepting, lets in-flight completions finish within the grace (default: the
   * configured one), aborts the rest, disposes the model. Every step is time-bounded.
   */
  close(graceMs?: number): Promise<void>;
}

/** Why a completion ended early: each becomes a clear error, never an empty reply. */
class EndReason extends Error {
  constructor(
    readonly kind: 'timeout' | 'shutdown' | 'client',
    message: string,
  ) {
    super(message);
    this.name = 'EndReason';
  }
}

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, ms).unref();
  });

async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await sleep(Math.min(20, Math.max(1, deadline - Date.now())));
}

function listen(server: Server, addr: HostPort, what: string): Promise<HostPort> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => reject(new ListenError(what, addr, err));
    server.once('error', onError);
    server.listen({ host: addr.host, port: addr.port, exclusive: true }, () => {
      server.off('error', onError);
      const a = server.address() as AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

/** Reads a request body up to `limit` bytes; ApiError 413 beyond. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = () =>
    new ApiError(
      413,
      `The request body is larger than ${limit} bytes.`,
      'invalid_request_error',
      null,
      'body_too_large',
    );
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    // A client that leaves in the middle of its body: nothing waits for the rest.
    req.on('close', () => {
      if (!req.complete)
        reject(new ApiError(499, 'The client closed the connection.', 'client_closed', null, 'client_closed'));
    });
  });
}

const JSON_HEADERS = { 'content-type': 'application/json' };

/** Starts the server. Rejects with ConfigError (exit 78), StartupError or ListenError (exit 1). */
export async function start(options: ServerOptions & { stuckAfterMs?: number }): Promise<ServerHandle> {
  const logger: Logger = options.logger ?? createLogger({ level: 'info', service: 'inference-server' });
  const config = resolveConfig(options, logger);

  // Integrity first: nothing is served from a model that fails its manifest.
  if (config.manifest) {
    try {
      const r = await verifyManifest(config.manifest, config.model, config.manifestKey);
      logger.info('manifest verified', {
        manifest: config.manifest,
        sha256: r.entry.sha256,
        signature: r.signatureChecked ? 'valid' : r.signed ? 'not checked (no --manifest-key)' : 'none',
      });
    } catch (err) {
      if (err instanceof ManifestError) {
        throw err.kind === 'signature'
          ? new StartupError('ESIGNATURE', `signature invalid: ${err.message}`)
          : new StartupError('EMANIFEST', `manifest verification failed: ${err.message}`);
      }
      throw new StartupError('EMANIFEST', `manifest verification failed: ${(err as Error).message}`);
    }
  }

  // The file's header, metadata and tensor table are checked here, in JavaScript: llama.cpp
  // can abort the process on some malformed files.
  try {
    checkModelSummary(await readGgufSummary(config.model));
  } catch (err) {
    const reason = err instanceof GgufError ? err.message : `cannot read it: ${(err as Error).message}`;
    throw new StartupError('ELOAD', `model load failed: ${config.model} is not a usable GGUF model: ${reason}`);
  }

  let tls: { cert: Buffer; key: Buffer; ca: Buffer } | null = null;
  if (config.mtls) {
    try {
      tls = {
        cert: await readFile(config.tlsCert!),
        key: await readFile(config.tlsKey!),
        ca: await readFile(config.tlsCa!),
      };
    } catch (err) {
      throw new ConfigError(`cannot read the TLS files: ${(err as Error).message}`);
    }
  }

  let accessLog: AccessLog | null = null;
  if (config.accessLog) {
    try {
      accessLog = new AccessLog(openSync(config.accessLog, 'a', 0o640));
    } catch (err) {
      throw new ConfigError(`cannot open the access log ${config.accessLog}: ${(err as Error).message}`);
    }
  }

  let state: ServerState = 'loading';
  let engine: Engine | null = null;
  const scheduler = new Scheduler(config.parallel, config.maxQueue, options.stuckAfterMs);
  /** Aborters of every completion under way (running or queued). */
  const inFlight = new Set<(reason: EndReason) => void>();
  /** Responses not yet finished. */
  let openResponses = 0;
  const loadAbort = new AbortController();

  const modelsBody = Buffer.from(JSON.stringify(modelList(config.modelIds, config.createdAt)));
  const modelBodies = new Map(
    modelList(config.modelIds, config.createdAt).data.map((m) => [m.id, Buffer.from(JSON.stringify(m))]),
  );
  const knownModels = new Set(config.modelIds);

  const access = (
    req: IncomingMessage,
    listener: string,
    startedNs: bigint,
    status: number,
    extra: Record<string, unknown> = {},
    msg = 'request',
  ) => {
    if (!accessLog) return;
    const durationMs = Number(process.hrtime.bigint() - startedNs) / 1e6;
    const path = (req.url ?? '/').split('?')[0];
    accessLog.write({
      ts: Date.now() / 1000,
      level: status >= 500 && path !== INFERENCE_PATHS.health ? 'warn' : 'info',
      msg,
      method: req.method,
      path,
      status,
      duration_ms: Math.round(durationMs * 1000) / 1000,
      listener,
      remote: req.socket.remoteAddress,
      ...extra,
    });
  };

  const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    if (res.headersSent || res.destroyed) return;
    const data = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    res.writeHead(status, { ...JSON_HEADERS, 'content-length': String(data.length), ...headers });
    res.end(data);
  };

  const sendError = (res: ServerResponse, err: ApiError) => {
    sendJson(res, err.status, err.toJSON(), { ...err.headers });
  };

  const toApiError = (err: unknown): ApiError => {
    if (err instanceof ApiError) return err;
    if (err instanceof QueueFullError) {
      return new ApiError(429, err.message, 'rate_limit_exceeded', null, 'rate_limit_exceeded', {
        'retry-after': String(err.retryAfterS),
      });
    }
    if (err instanceof ContextLengthError) return invalid(err.message, 'messages', 'context_length_exceeded');
    if (err instanceof EndReason) {
      if (err.kind === 'timeout') return new ApiError(504, err.message, 'timeout', null, 'request_timeout');
      if (err.kind === 'shutdown') {
        return new ApiError(503, err.message, 'server_error', null, 'shutting_down', { 'retry-after': '5' });
      }
      return new ApiError(499, err.message, 'client_closed', null, 'client_closed');
    }
    return new ApiError(
      500,
      `The model failed: ${(err as Error)?.message ?? String(err)}`,
      'server_error',
      null,
      'internal_error',
    );
  };

  const health = (): { status: number; body: { status: string; [k: string]: unknown } } => {
    if (state === 'ready') {
      const stuck = scheduler.stuck();
      if (stuck >= scheduler.slots) {
        return {
          status: 503,
          body: { status: 'unavailable', reason: 'every sequence is stuck in an aborted generation' },
        };
      }
      return { status: 200, body: { status: 'ok' } };
    }
    return { status: 503, body: { status: state === 'stopped' ? 'stopping' : state } };
  };

  async function completions(req: IncomingMessage, res: ServerResponse, listener: string, startedNs: bigint) {
    const started = Date.now();
    let body: CompletionRequest;
    try {
      const raw = await readBody(req, config.maxBodyBytes);
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw.toString('utf8'));
      } catch {
        throw invalid(
          'We could not parse the JSON body of your request. The body must be a JSON object (Content-Type: application/json).',
          null,
          'invalid_json',
        );
      }
      body = parseCompletionRequest(parsed);
      if (!knownModels.has(body.model)) throw modelNotFound(body.model);
      if (state !== 'ready' || !engine) {
        throw new ApiError(
          503,
          state === 'loading' ? 'The model is still loading. Retry shortly.' : 'The server is shutting down.',
          'server_error',
          null,
          state === 'loading' ? 'model_loading' : 'shutting_down',
          { 'retry-after': state === 'loading' ? '2' : '5' },
        );
      }
    } catch (err) {
      const e = toApiError(err);
      sendError(res, e);
      access(req, listener, startedNs, e.status, { error: e.code ?? e.type });
      return;
    }
    const eng = engine;
    const ac = new AbortController();
    const abort = (reason: EndReason) => {
      if (!ac.signal.aborted) ac.abort(reason);
    };
    inFlight.add(abort);
    const timer = setTimeout(
      () =>
        abort(
          new EndReason(
            'timeout',
            `The completion did not finish within ${config.requestTimeoutMs / 1000} s (--request-timeout) and was stopped.`,
          ),
        ),
      config.requestTimeoutMs,
    );
    res.on('close', () => {
      if (!res.writableFinished) abort(new EndReason('client', 'The client closed the connection.'));
    });
    /** Settles (rejects) when the completion is aborted, whatever the native side does. */
    const aborted = new Promise<never>((_, reject) => {
      if (ac.signal.aborted) reject(ac.signal.reason);
      ac.signal.addEventListener('abort', () => reject(ac.signal.reason), { once: true });
    });
    aborted.catch(() => {});

    const id = completionId();
    const created = Math.floor(Date.now() / 1000);
    let slot: number | null = null;
    let streaming = false;
    let promptTokens = 0;
    let completionTokens = 0;
    const writeEvent = (data: unknown) => {
      if (!res.destroyed && !res.writableEnded)
        res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
    };
    try {
      slot = await scheduler.acquire(ac.signal);
      const held = slot;
      if (ac.signal.aborted) {
        scheduler.release(held);
        throw ac.signal.reason;
      }
      ac.signal.addEventListener('abort', () => scheduler.noteAborted(held), { once: true });
      if (body.stream) {
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
        });
        streaming = true;
        writeEvent(chunk(id, created, body.model, { role: 'assistant', content: '' }));
      }
      const generation = eng.complete(held, {
        messages: body.messages,
        maxTokens: body.maxTokens,
        temperature: body.temperature,
        topP: body.topP,
        seed: body.seed,
        stop: body.stop,
        frequencyPenalty: body.frequencyPenalty,
        presencePenalty: body.presencePenalty,
        signal: ac.signal,
        onTokens: (n: number) => {
          completionTokens = n;
        },
        ...(body.stream
          ? {
              onText: (text: string) => {
                if (text !== '') writeEvent(chunk(id, created, body.model, { content: text }));
              },
            }
          : {}),
      });
      // The sequence is given back when the generation has really ended, not before.
      generation.then(
        () => scheduler.release(held, Date.now() - started),
        () => scheduler.release(held),
      );
      const out = await Promise.race([generation, aborted]);
      promptTokens = out.promptTokens;
      completionTokens = out.completionTokens;
      const u = usage(out.promptTokens, out.completionTokens);
      if (streaming) {
        writeEvent(chunk(id, created, body.model, {}, out.finishReason));
        if (body.includeUsage) writeEvent(usageChunk(id, created, body.model, u));
        writeEvent('[DONE]');
        res.end();
      } else {
        sendJson(res, 200, completionBody(id, created, body.model, out.text, out.finishReason, u));
      }
      access(
        req,
        listener,
        startedNs,
        200,
        {
          model: body.model,
          stream: body.stream,
          finish_reason: out.finishReason,
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          tokens: promptTokens + completionTokens,
        },
        PRIMARY_SUCCESS_MARKER,
      );
    } catch (err) {
      const e = toApiError(err);
      if (e.status >= 500 && e.code !== 'shutting_down') {
        logger.warn('completion failed', { id, status: e.status, error: e.message });
      }
      if (streaming) {
        writeEvent(e.toJSON());
        writeEvent('[DONE]');
        if (!res.destroyed) res.end();
      } else if (e.status !== 499) {
        sendError(res, e);
      }
      // Status as sent; 499 (nginx's "client closed request") when the client left.
      access(
        req,
        listener,
        startedNs,
        e.status === 499 || !streaming ? e.status : 200,
        {
          model: body.model,
          stream: body.stream,
          error: e.code ?? e.type,
          completion_tokens: completionTokens,
          tokens: promptTokens + completionTokens,
        },
        'request failed',
      );
    } finally {
      clearTimeout(timer);
      inFlight.delete(abort);
    }
  }

  const handler = (listener: string) => (req: IncomingMessage, res: ServerResponse) => {
    const startedNs = process.hrtime.bigint();
    openResponses++;
    res.once('close', () => {
      openResponses--;
    });
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    // DNS-rebinding protection on the plain listener (mTLS clients are authenticated).
    const bound = listener === 'http' ? config.http : null;
    if (bound && !isWildcardHost(bound.host)) {
      const host = (req.headers.host ?? '').replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
      if (host !== '' && !isLoopbackHost(host) && host !== bound.host) {
        sendError(
          res,
          new ApiError(
            421,
            `Misdirected request: Host ${host} is not served here.`,
            'invalid_request_error',
            null,
            'misdirected',
          ),
        );
        access(req, listener, startedNs, 421);
        return;
      }
    }
    if (state === 'stopping' || state === 'stopped') {
      res.setHeader('connection', 'close');
      if (path === INFERENCE_PATHS.health) {
        sendJson(res, 503, { status: 'stopping' });
        access(req, listener, startedNs, 503);
        return;
      }
      sendError(
        res,
        new ApiError(503, 'The server is shutting down.', 'server_error', null, 'shutting_down', {
          'retry-after': '5',
        }),
      );
      access(req, listener, startedNs, 503);
      return;
    }
    if (path === INFERENCE_PATHS.models || path.startsWith(`${INFERENCE_PATHS.models}/`)) {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        sendError(
          res,
          new ApiError(
            405,
            `Method ${req.method} is not allowed on ${path}.`,
            'invalid_request_error',
            null,
            'method_not_allowed',
            { allow: 'GET' },
          ),
        );
        access(req, listener, startedNs, 405);
        return;
      }
      if (path === INFERENCE_PATHS.models) {
        sendJson(res, 200, modelsBody);
        access(req, listener, startedNs, 200);
        return;
      }
      const one = modelBodies.get(decodeURIComponent(path.slice(INFERENCE_PATHS.models.length + 1)));
      if (one) sendJson(res, 200, one);
      else sendError(res, modelNotFound(decodeURIComponent(path.slice(INFERENCE_PATHS.models.length + 1))));
      access(req, listener, startedNs, one ? 200 : 404);
      return;
    }
    if (path === INFERENCE_PATHS.health) {
      const h = health();
      sendJson(res, h.status, h.body);
      access(req, listener, startedNs, h.status);
      return;
    }
    if (path === INFERENCE_PATHS.chatCompletions) {
      if (req.method !== 'POST') {
        sendError(
          res,
          new ApiError(
            405,
            `Method ${req.method} is not allowed on ${path}: use POST.`,
            'invalid_request_error',
            null,
            'method_not_allowed',
            { allow: 'POST' },
          ),
        );
        access(req, listener, startedNs, 405);
        return;
      }
      void completions(req, res, listener, startedNs);
      return;
    }
    sendError(
      res,
      new ApiError(404, `Unknown request URL: ${req.method} ${path}.`, 'invalid_request_error', null, 'unknown_url'),
    );
    access(req, listener, startedNs, 404);
  };

  const servers: Server[] = [];
  const httpServer = config.http ? createHttpServer({ noDelay: true }, handler('http')) : null;
  let mtlsServer: Server | null = null;
  if (config.mtls && tls) {
    try {
      mtlsServer = createHttpsServer(
        { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true, noDelay: true },
        handler('mtls'),
      );
    } catch (err) {
      throw new ConfigError(`the TLS files are not usable: ${(err as Error).message}`);
    }
    mtlsServer.on('tlsClientError', (err) => logger.debug('TLS handshake refused', { error: err.message }));
  }
  let httpAddr: HostPort | null = null;
  let mtlsAddr: HostPort | null = null;
  try {
    if (httpServer && config.http) {
      httpAddr = await listen(httpServer, config.http, 'HTTP');
      servers.push(httpServer);
    }
    if (mtlsServer && config.mtls) {
      mtlsAddr = await listen(mtlsServer, config.mtls, 'mTLS');
      servers.push(mtlsServer);
    }
  } catch (err) {
    await Promise.all(servers.map(closeServer));
    accessLog?.close();
    throw err;
  }
  for (const s of servers) {
    // Slow-header and idle protections; the completion itself is bounded by requestTimeoutMs.
    s.headersTimeout = 30_000;
    s.requestTimeout = Math.max(config.requestTimeoutMs + 5_000, 60_000);
  }

  logger.info('listening', {
    http: httpAddr ? formatHostPort(httpAddr) : 'off',
    mtls: mtlsAddr ? formatHostPort(mtlsAddr) : 'off',
    model: config.model,
    modelIds: config.modelIds,
    parallel: config.parallel,
    threads: config.threads,
    batchThreads: config.batchThreads,
    maxQueue: config.maxQueue,
    pid: process.pid,
    version: VERSION,
  });

  const loadStarted = Date.now();
  const ready = Engine.load({
    modelPath: config.model,
    gpu: config.gpu,
    threads: config.threads,
    batchThreads: config.batchThreads,
    parallel: config.parallel,
    contextSize: config.contextSize,
    maxDefaultContextSize: DEFAULTS.maxDefaultContextSize,
    logger,
    signal: loadAbort.signal,
  }).then(
    async (e) => {
      if (state !== 'loading') {
        await e.dispose();
        throw new StartupError('ESTOPPED', 'stopped while the model was loading');
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
      });
    },
    (err: Error) => {
      if (state === 'loading') state = 'failed';
      throw new StartupError('ELOAD', err.message);
    },
  );
  ready.catch(() => {});

  /** The shutdown itself; close() runs it once, holding the event loop until it ends. */
  const shutdown = async (graceMs: number) => {
    const wasLoading = state === 'loading';
    state = 'stopping';
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
    await waitUntil(() => openResponses === 0, 300);
    logger.debug('shutdown: replies sent', { openResponses });
    for (const s of servers) s.closeAllConnections();
    await Promise.race([Promise.all(closed), sleep(300)]);
    logger.debug('shutdown: listeners closed');
    // A generation that does not let go must not hold the exit: disposal is bounded too.
    const eng = engine as Engine | null;
    if (eng) await Promise.race([eng.dispose(), sleep(700)]);
    else if (wasLoading) await Promise.race([ready.catch(() => {}), sleep(700)]);
    logger.debug('shutdown: model disposed');
    await Promise.race([accessLog?.close(), sleep(200)]);
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
    http: httpAddr,
    mtls: mtlsAddr,
    ready,
    state: () => state,
    load: () => ({ active: scheduler.active, waiting: scheduler.waiting, stuck: scheduler.stuck() }),
    close,
  };
}

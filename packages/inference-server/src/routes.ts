/**
 * The routes, the same on both listeners: /v1/models (static, never touches the model), /health,
 * the generating routes of protocols/routes.ts (chat completions, Responses, Anthropic Messages, …);
 * errors in the shape of each path's protocol; 421 for a foreign Host on the plain listener, 403 for a web origin not
 * allowed, 415 for a body that is not JSON, 503 while stopping, 404 and 405 as OpenAI answers them.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { hostAllowed, hostHeaderName, INFERENCE_PATHS } from '@vigil/shared-types';
import { keyMatches, requestKey } from './auth.js';
import { checkOrigin, isJsonBody, unsupportedMediaType } from './browser.js';
import type { ServerContext } from './context.js';
import { directSteps } from './engine-step.js';
import type { ApiError } from './errors.js';
import { sendJson } from './http.js';
import { decodePathPart, lastResort, requestPath } from './last-resort.js';
import { METRICS_CONTENT_TYPE, METRICS_PATH } from './metrics.js';
import {
  invalidApiKey,
  methodNotAllowed,
  misdirected,
  modelList,
  modelNotFound,
  shuttingDown,
  unknownUrl,
} from './openai.js';
import { errorBodyFor, generationRoutes } from './protocols/routes.js';

/**
 * /health: 200 when a completion can be served, else 503 with the reason; `progress` (when the
 * model is loaded) says whether the model is working: see progress.ts.
 */
export function health(ctx: ServerContext): { status: number; body: { status: string; [k: string]: unknown } } {
  const state = ctx.state();
  if (state === 'ready') {
    const progress = ctx.progress.report();
    if (progress.reason !== null) {
      return { status: 503, body: { status: 'stalled', reason: progress.reason, progress } };
    }
    if (ctx.scheduler.stuck() >= ctx.scheduler.slots) {
      return {
        status: 503,
        body: { status: 'unavailable', reason: 'every sequence is stuck in an aborted generation', progress },
      };
    }
    return { status: 200, body: { status: 'ok', progress } };
  }
  return { status: 503, body: { status: state === 'stopped' ? 'stopping' : state } };
}

/** The request handler of one listener (`http` or `mtls`). */
export function createHandler(
  ctx: ServerContext,
  listener: 'http' | 'mtls',
): (req: IncomingMessage, res: ServerResponse) => void {
  const { config } = ctx;
  const models = modelList(config.modelIds, config.createdAt);
  const modelsBody = Buffer.from(JSON.stringify(models));
  const modelBodies = new Map(models.data.map((m) => [m.id, Buffer.from(JSON.stringify(m))]));
  // DNS-rebinding protection on the plain listener (mTLS clients are authenticated).
  // (On the mTLS listener the client's check of the server certificate's names already defeats it.)
  const bound = listener === 'http' ? config.http : null;
  const origins = new Set(config.allowOrigins);
  // The key guards the plain listener; an mTLS client's certificate is its credential.
  const apiKey = listener === 'http' ? config.apiKey : null;
  const generating = generationRoutes(ctx);

  const route = (req: IncomingMessage, res: ServerResponse, startedNs: bigint, path: string) => {
    const done = (status: number) => ctx.access(req, listener, startedNs, status);
    // Errors in the shape of the path's protocol (Anthropic's on /v1/messages).
    const errorBody = errorBodyFor(path);
    const sendError = (r: ServerResponse, e: ApiError) => sendJson(r, e.status, errorBody(e), { ...e.headers });
    if (bound && !hostAllowed(req.headers.host, bound.host)) {
      sendError(res, misdirected(hostHeaderName(req.headers.host ?? '')));
      return done(421);
    }
    const origin = checkOrigin(req, res, origins);
    if (origin.kind === 'refused') {
      sendError(res, origin.error);
      return done(403);
    }
    if (origin.kind === 'preflight') return done(204);
    // Every route but /health (the probes of service managers carry no key) needs the key.
    if (apiKey !== null && path !== INFERENCE_PATHS.health) {
      const token = requestKey(req);
      if (!keyMatches(token, apiKey)) {
        sendError(res, invalidApiKey(token !== null));
        return done(401);
      }
    }
    const state = ctx.state();
    if (state === 'stopping' || state === 'stopped') {
      res.setHeader('connection', 'close');
      if (path === INFERENCE_PATHS.health) sendJson(res, 503, { status: 'stopping' });
      else sendError(res, shuttingDown());
      return done(503);
    }
    if (path === INFERENCE_PATHS.models || path.startsWith(`${INFERENCE_PATHS.models}/`)) {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        sendError(res, methodNotAllowed(req.method, path, 'GET'));
        return done(405);
      }
      if (path === INFERENCE_PATHS.models) {
        sendJson(res, 200, modelsBody);
        return done(200);
      }
      const id = decodePathPart(path.slice(INFERENCE_PATHS.models.length + 1));
      const one = modelBodies.get(id);
      if (one) sendJson(res, 200, one);
      else sendError(res, modelNotFound(id));
      return done(one ? 200 : 404);
    }
    if (path === METRICS_PATH) {
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        sendError(res, methodNotAllowed(req.method, path, 'GET'));
        return done(405);
      }
      const { scheduler } = ctx;
      const text = ctx.metrics.render({
        state: ctx.state(),
        queued: scheduler.waiting,
        busy: scheduler.active,
        sequences: scheduler.slots,
        stateCache: ctx.engine()?.states ?? null,
        progress: ctx.progress.report(),
        directSteps: directSteps(),
      });
      res.writeHead(200, { 'content-type': METRICS_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
      res.end(req.method === 'HEAD' ? undefined : text);
      return done(200);
    }
    if (path === INFERENCE_PATHS.health) {
      const h = health(ctx);
      sendJson(res, h.status, h.body);
      return done(h.status);
    }
    const generate = generating.get(path);
    if (generate) {
      if (req.method !== 'POST') {
        sendError(res, methodNotAllowed(req.method, path, 'POST', true));
        return done(405);
      }
      if (!isJsonBody(req)) {
        sendError(res, unsupportedMediaType(req.headers['content-type']));
        return done(415);
      }
      generate(req, res, listener, startedNs).catch((err: unknown) =>
        lastResort(ctx, req, res, listener, startedNs, err, errorBody),
      );
      return;
    }
    sendError(res, unknownUrl(req.method, path));
    done(404);
  };

  return (req, res) => {
    const startedNs = process.hrtime.bigint();
    ctx.responses.open++;
    res.once('close', () => {
      ctx.responses.open--;
    });
    const path = requestPath(req.url);
    try {
      route(req, res, startedNs, path);
    } catch (err) {
      lastResort(ctx, req, res, listener, startedNs, err, errorBodyFor(path));
    }
  };
}

/**
 * The generating routes and their protocols: path → the handler that runs the one request
 * pipeline with the route's adapter, and each path's error shape (Anthropic's on /v1/messages,
 * OpenAI's elsewhere), which the route guards (key, Host, Origin, method, media type) use too.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { INFERENCE_PATHS } from '@vigil/shared-types';
import { chatProtocol } from '../completion.js';
import type { ServerContext } from '../context.js';
import type { ApiError } from '../errors.js';
import { chatFunctions } from '../history.js';
import { sendJson } from '../http.js';
import { checkModel, type Protocol, readJson, sendProtocolError, serveGeneration } from '../pipeline.js';
import { anthropicErrorBody, parseMessagesRequest } from './anthropic.js';
import { anthropicError, anthropicProtocol } from './anthropic-output.js';
import { HostedTools } from './common.js';
import { legacyProtocol } from './completions.js';
import { serveEmbeddings } from './embeddings.js';
import { ResponseStore, responsesProtocol } from './responses-output.js';

/** Serves one request; rejects only on a bug (routes.ts answers it with the last-resort 500). */
export type RouteHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
) => Promise<void>;

/** The body of an error on `path`, in the shape of the path's protocol. */
export function errorBodyFor(path: string): (e: ApiError) => unknown {
  return path === INFERENCE_PATHS.messages || path === INFERENCE_PATHS.countTokens
    ? anthropicErrorBody
    : (e) => e.toJSON();
}

/** What one server keeps across requests and listeners: the response store, the hosted-tool log. */
const shared = new WeakMap<ServerContext, { store: ResponseStore; hosted: HostedTools }>();

/** The POST routes that generate (or count tokens), by path. */
export function generationRoutes(ctx: ServerContext): ReadonlyMap<string, RouteHandler> {
  let s = shared.get(ctx);
  if (!s) {
    s = { store: new ResponseStore(), hosted: new HostedTools(ctx.config.strictTools, ctx.logger) };
    shared.set(ctx, s);
  }
  const { store, hosted } = s;
  const input = ctx.config.inputLimits;
  const limits = { maxN: ctx.config.maxN, input };
  const run =
    (protocol: Protocol<never>): RouteHandler =>
    (req, res, listener, startedNs) =>
      serveGeneration(ctx, protocol, req, res, listener, startedNs);
  return new Map<string, RouteHandler>([
    [INFERENCE_PATHS.chatCompletions, run(chatProtocol(limits) as Protocol<never>)],
    [INFERENCE_PATHS.responses, run(responsesProtocol(hosted, store, input) as Protocol<never>)],
    [INFERENCE_PATHS.messages, run(anthropicProtocol(hosted, input) as Protocol<never>)],
    [INFERENCE_PATHS.completions, run(legacyProtocol(limits) as Protocol<never>)],
    [
      INFERENCE_PATHS.embeddings,
      (req, res, listener, startedNs) => serveEmbeddings(ctx, req, res, listener, startedNs),
    ],
    [
      INFERENCE_PATHS.countTokens,
      (req, res, listener, startedNs) => countTokens(ctx, hosted, req, res, listener, startedNs),
    ],
  ]);
}

/** POST /v1/messages/count_tokens: the prompt's tokens as the model's chat template renders them. */
async function countTokens(
  ctx: ServerContext,
  hosted: HostedTools,
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
): Promise<void> {
  try {
    const body = parseMessagesRequest(await readJson(ctx, req), hosted, true, ctx.config.inputLimits);
    const eng = checkModel(ctx, body.model);
    const functions = body.toolChoice !== 'none' && body.tools.length > 0 ? chatFunctions(body.tools) : undefined;
    const tokens = eng.countPromptTokens(body.messages, functions);
    sendJson(res, 200, { input_tokens: tokens });
    ctx.access(req, listener, startedNs, 200, { model: body.model, prompt_tokens: tokens });
  } catch (err) {
    const e = anthropicError(err);
    sendProtocolError(res, { errorBody: anthropicErrorBody }, e);
    ctx.access(req, listener, startedNs, e.status, { error: e.wireCode });
  }
}

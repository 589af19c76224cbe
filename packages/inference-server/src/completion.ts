/**
 * One chat completion, from request body to the last byte: parse and check the request, wait for a
 * sequence, generate (streamed as Server-Sent Events or as one reply), and end it with a clear
 * error whatever stops it: its deadline (`requestTimeoutMs`, queueing included), the client
 * leaving, or the shutdown. The deadline answers even when the native generation does not let go.
 */
import { randomInt } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PRIMARY_SUCCESS_MARKER } from '@vigil/shared-types';
import type { ServerContext } from './context.js';
import { EndReason } from './errors.js';
import { readBody, sendError, sendJson } from './http.js';
import {
  type CompletionRequest,
  chunk,
  completionBody,
  completionId,
  invalidJson,
  modelLoading,
  modelNotFound,
  parseCompletionRequest,
  shuttingDown,
  toApiError,
  usage,
  usageChunk,
} from './openai.js';

/** Reads and checks the request; throws ApiError (4xx, or 503 while loading or stopping). */
async function readRequest(ctx: ServerContext, req: IncomingMessage): Promise<CompletionRequest> {
  const raw = await readBody(req, ctx.config.maxBodyBytes);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw invalidJson();
  }
  const body = parseCompletionRequest(parsed);
  if (!ctx.config.modelIds.includes(body.model)) throw modelNotFound(body.model);
  if (ctx.state() !== 'ready' || !ctx.engine()) throw ctx.state() === 'loading' ? modelLoading() : shuttingDown();
  return body;
}

/** Serves POST /v1/chat/completions; never rejects. */
export async function serveCompletion(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
): Promise<void> {
  const { config, scheduler } = ctx;
  const started = Date.now();
  let body: CompletionRequest;
  try {
    body = await readRequest(ctx, req);
  } catch (err) {
    const e = toApiError(err);
    sendError(res, e);
    ctx.access(req, listener, startedNs, e.status, { error: e.code });
    return;
  }
  const eng = ctx.engine()!;
  const ac = new AbortController();
  const abort = (reason: EndReason) => {
    if (!ac.signal.aborted) ac.abort(reason);
  };
  ctx.inFlight.add(abort);
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
  let streaming = false;
  let promptTokens = 0;
  let completionTokens = 0;
  const writeEvent = (data: unknown) => {
    if (!res.destroyed && !res.writableEnded)
      res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  };
  try {
    const held = await scheduler.acquire(ac.signal);
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
      // llama.cpp's default seed is the current second: requests without one would repeat each other.
      seed: body.seed ?? randomInt(0x1_0000_0000),
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
    ctx.access(
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
      ctx.logger.warn('completion failed', { id, status: e.status, error: e.message });
    }
    if (streaming) {
      writeEvent(e.toJSON());
      writeEvent('[DONE]');
      if (!res.destroyed) res.end();
    } else if (e.status !== 499) {
      sendError(res, e);
    }
    // Status as sent; 499 (nginx's "client closed request") when the client left.
    ctx.access(
      req,
      listener,
      startedNs,
      e.status === 499 || !streaming ? e.status : 200,
      {
        model: body.model,
        stream: body.stream,
        error: e.code,
        completion_tokens: completionTokens,
        tokens: promptTokens + completionTokens,
      },
      'request failed',
    );
  } finally {
    clearTimeout(timer);
    ctx.inFlight.delete(abort);
  }
}

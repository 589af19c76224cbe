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
import type { Engine, FunctionCalling } from './engine.js';
import { ApiError, EndReason, QueueFullError } from './errors.js';
import { chatFunctions } from './history.js';
import { readBody, sendError, sendJson } from './http.js';
import {
  type Choice,
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
  toolCallId,
  usage,
  usageChunk,
} from './openai.js';
import { invalid } from './request.js';

/** What a request asks of generation beyond sampling: function calling, or a grammar. */
interface Constraints {
  readonly functionCalling?: FunctionCalling;
  readonly grammar?: Awaited<ReturnType<Engine['grammarFor']>>;
}

/** Function calling and structured output for `body`; a grammar node-llama-cpp refuses is a 400. */
async function constraintsFor(eng: Engine, body: CompletionRequest): Promise<Constraints> {
  const { toolChoice, tools } = body;
  if (toolChoice !== 'none' && tools.length > 0) {
    const named = typeof toolChoice === 'object' ? tools.filter((t) => t.name === toolChoice.name) : tools;
    const functions = chatFunctions(named);
    // node-llama-cpp builds their grammars on the event loop while it generates: first in the
    // worker, within the budget.
    await eng.checkFunctions(functions);
    return {
      functionCalling: {
        functions,
        force: toolChoice !== 'auto',
        maxCalls: body.parallelToolCalls && typeof toolChoice !== 'object' ? Math.max(1, tools.length) : 1,
      },
    };
  }
  const f = body.responseFormat;
  if (f.type === 'text') return {};
  const schema = f.type === 'json_object' ? { type: 'object', additionalProperties: true } : f.schema;
  const param = f.type === 'json_schema' ? 'response_format.json_schema.schema' : 'response_format';
  try {
    return { grammar: await eng.grammarFor(schema, param) };
  } catch (err) {
    if (err instanceof ApiError || err instanceof QueueFullError) throw err;
    throw invalid(`Invalid '${param}': ${(err as Error).message}`, param, 'unsupported_value');
  }
}

/** Reads and checks the request; throws ApiError (4xx, or 503 while loading or stopping). */
async function readRequest(ctx: ServerContext, req: IncomingMessage): Promise<CompletionRequest> {
  const raw = await readBody(req, ctx.config.maxBodyBytes);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw invalidJson();
  }
  const body = parseCompletionRequest(parsed, { maxN: ctx.config.maxN, input: ctx.config.inputLimits });
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
  let cachedTokens = 0;
  let completionTokens = 0;
  let lastWrite = Date.now();
  const write = (text: string) => {
    if (!res.destroyed && !res.writableEnded) {
      res.write(text);
      lastWrite = Date.now();
    }
  };
  const writeEvent = (data: unknown) => write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  // While the prompt is evaluated (or the model is slow) a stream that has sent nothing for a
  // while gets an SSE comment, so that proxies and clients do not give up on it.
  let keepAlive: NodeJS.Timeout | undefined;
  try {
    // A grammar being built does not hold the request past its deadline, the client or the shutdown.
    const building = constraintsFor(eng, body);
    building.catch(() => {});
    const constraints = await Promise.race([building, aborted]);
    // The prompt's tokens choose the slot (the longest shared prefix) and are evaluated there.
    const tokens = eng.promptTokens(body.messages, constraints.functionCalling?.functions);
    const held = await scheduler.acquire(ac.signal, (slot) => eng.cachedPrefix(slot, tokens), tokens.length);
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
      for (let i = 0; i < body.n; i++)
        writeEvent(chunk(id, created, body.model, { role: 'assistant', content: '' }, null, i));
      const every = config.sseKeepAliveMs;
      if (every > 0) {
        keepAlive = setInterval(() => {
          if (Date.now() - lastWrite >= every) write(': keep-alive\n\n');
        }, every);
      }
    }
    let firstToken = false;
    /** The n choices one after another on the one sequence (its cache keeps the prompt). */
    const generateAll = async () => {
      const choices: Choice[] = [];
      let generated = 0;
      for (let i = 0; i < body.n; i++) {
        const calls = new StreamedCalls(id, created, body.model, i, writeEvent);
        const out = await eng.complete(held, {
          messages: body.messages,
          maxTokens: body.maxTokens,
          temperature: body.temperature,
          topP: body.topP,
          // llama.cpp's default seed is the current second: requests without one would repeat
          // each other. With a seed, choice i samples with seed + i (reproducible, and distinct).
          seed: body.seed === null ? randomInt(0x1_0000_0000) : (body.seed + i) >>> 0,
          stop: body.stop,
          frequencyPenalty: body.frequencyPenalty,
          presencePenalty: body.presencePenalty,
          signal: ac.signal,
          promptTokens: tokens,
          ...constraints,
          onTokens: (count: number) => {
            if (!firstToken) {
              firstToken = true;
              ctx.metrics.firstToken(Number(process.hrtime.bigint() - startedNs) / 1e9);
            }
            completionTokens = generated + count;
          },
          ...(body.stream
            ? {
                onText: (text: string) => {
                  if (text !== '') writeEvent(chunk(id, created, body.model, { content: text }, null, i));
                },
                onCallText: (callIndex: number, name: string, text: string) => calls.add(callIndex, name, text),
              }
            : {}),
        });
        generated += out.completionTokens;
        completionTokens = generated;
        promptTokens = out.promptTokens;
        // The prompt is counted once (as OpenAI does), with what its first evaluation reused.
        if (i === 0) {
          cachedTokens = out.cachedTokens;
          ctx.metrics.prompt(out.promptTokens, out.cachedTokens, out.restoredTokens);
        }
        const toolCalls = out.calls.map((c, k) => ({
          id: calls.ids[k] ?? toolCallId(),
          type: 'function' as const,
          function: { name: c.name, arguments: c.arguments },
        }));
        choices.push({ text: out.text, finishReason: out.finishReason, toolCalls });
        if (body.stream) writeEvent(chunk(id, created, body.model, {}, out.finishReason, i));
      }
      return choices;
    };
    const generation = generateAll();
    // The sequence is given back when the generation has really ended, not before.
    generation.then(
      () => scheduler.release(held, Date.now() - started),
      () => scheduler.release(held),
    );
    const choices = await Promise.race([generation, aborted]);
    const u = usage(promptTokens, completionTokens, cachedTokens);
    ctx.metrics.tokens(promptTokens, completionTokens);
    if (streaming) {
      if (body.includeUsage) writeEvent(usageChunk(id, created, body.model, u));
      writeEvent('[DONE]');
      res.end();
    } else {
      sendJson(res, 200, completionBody(id, created, body.model, choices, u));
    }
    const finish = [...new Set(choices.map((c) => c.finishReason))].join(',');
    ctx.access(
      req,
      listener,
      startedNs,
      200,
      {
        model: body.model,
        stream: body.stream,
        finish_reason: finish,
        prompt_tokens: promptTokens,
        cached_tokens: cachedTokens,
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
    clearInterval(keepAlive);
    ctx.inFlight.delete(abort);
  }
}

/**
 * A choice's function calls as stream deltas: the first piece of a call carries its id, type and
 * name; the rest, pieces of its arguments. Whitespace after the arguments' JSON (which the
 * function-call syntax may add) is held back and dropped.
 */
class StreamedCalls {
  readonly ids: string[] = [];
  private held = '';

  constructor(
    private readonly id: string,
    private readonly created: number,
    private readonly model: string,
    private readonly choice: number,
    private readonly send: (data: unknown) => void,
  ) {}

  add(callIndex: number, name: string, text: string): void {
    const delta = (d: Record<string, unknown>) =>
      this.send(
        chunk(
          this.id,
          this.created,
          this.model,
          { tool_calls: [{ index: callIndex, ...d }] as never },
          null,
          this.choice,
        ),
      );
    if (this.ids[callIndex] === undefined) {
      this.ids[callIndex] = toolCallId();
      this.held = '';
      delta({ id: this.ids[callIndex], type: 'function', function: { name, arguments: '' } });
    }
    const all = this.held + text;
    const body = all.trimEnd();
    this.held = all.slice(body.length);
    if (body !== '') delta({ function: { arguments: body } });
  }
}

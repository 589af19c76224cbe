/**
 * The one request pipeline every generating route runs (chat completions, Responses, Anthropic
 * Messages, legacy completions): read the body within its limit, let the route's protocol turn
 * it into the engine's one request (`CompletionRequest`), check the model and the state, wait
 * for a sequence in the bounded queue (429 + Retry-After), generate, and hand the engine's one
 * result to the protocol's output, streamed or whole. Its deadline (`requestTimeoutMs`, queueing
 * included), the client leaving and the shutdown end it with a clear error in the protocol's own
 * shape; the access-log line (`request completed`, which the guardian reads) and the metrics are
 * the same for every route. The deadline answers even when the native generation does not let go.
 */
import { randomInt } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PRIMARY_SUCCESS_MARKER } from '@vigil/shared-types';
import type { Token } from 'node-llama-cpp';
import type { ServerContext } from './context.js';
import type { Engine, FunctionCalling } from './engine.js';
import { ApiError, ContextLengthError, invalid, QueueFullError } from './errors.js';
import { chatFunctions } from './history.js';
import { readBody, sendJson } from './http.js';
import { type FinishReason, invalidJson, modelLoading, modelNotFound, shuttingDown } from './openai.js';
import type { CompletionRequest } from './request.js';
import { type RequestAbort, requestAbort } from './request-abort.js';

/** One generated choice as the engine ends it: text, why it ended, the calls it made. */
export interface GeneratedChoice {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly calls: readonly { readonly name: string; readonly arguments: string }[];
  /** The stop string that ended the text; null when something else ended it. */
  readonly stopSequence: string | null;
}

/** The engine's one result for a request. */
export interface Generation {
  readonly choices: readonly GeneratedChoice[];
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Of `promptTokens`, those not evaluated again (a reused prefix); each protocol's usage says it. */
  readonly cachedTokens: number;
}

/** How one request's result is written in its protocol. Created after the request was parsed. */
export interface Output {
  /** Streamed: the events that open the stream (after the headers). */
  begin(): void;
  /** Streamed: a piece of choice `choice`'s text. */
  text(choice: number, text: string): void;
  /** Streamed: a piece of the arguments of call `callIndex` of choice `choice`. */
  callText(choice: number, callIndex: number, name: string, text: string): void;
  /** Streamed: choice `choice` has ended. */
  endChoice(choice: number, result: GeneratedChoice): void;
  /** Streamed: writes the closing events (returns nothing); not streamed: returns the body. */
  finish(result: Generation): unknown;
  /** Streamed: the request failed after the stream began. */
  fail(err: ApiError): void;
}

/** A protocol adapter: its request into the engine's, the engine's result into its answer. */
export interface Protocol<R extends CompletionRequest = CompletionRequest> {
  /** Validates the parsed JSON body; throws ApiError (400 naming the field). */
  parse(raw: unknown, req: IncomingMessage): R | Promise<R>;
  /** Any failure as this protocol's ApiError (context overflow in the form its clients compact on). */
  error(err: unknown): ApiError;
  /** The body of an error answer, in this protocol's shape. */
  errorBody(err: ApiError): unknown;
  /** The output of one request; `write` sends raw text on the stream. */
  output(request: R, write: (text: string) => void): Output;
}

/** Server-Sent Events: one event with a name (Responses, Anthropic) or without (chat). */
export const sse = (event: string | null, data: unknown): string =>
  `${event === null ? '' : `event: ${event}\n`}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

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
  const param = f.type === 'json_schema' ? (f.param ?? 'response_format.json_schema.schema') : 'response_format';
  try {
    return { grammar: await eng.grammarFor(schema, param) };
  } catch (err) {
    if (err instanceof ApiError || err instanceof QueueFullError) throw err;
    throw invalid(`Invalid '${param}': ${(err as Error).message}`, param, 'unsupported_value');
  }
}

/** Reads the body as JSON; throws ApiError (413, 400 invalid_json, 499). */
export async function readJson(ctx: ServerContext, req: IncomingMessage): Promise<unknown> {
  const raw = await readBody(req, ctx.config.maxBodyBytes);
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw invalidJson();
  }
}

/** The model is served and loaded; throws 404 model_not_found, or 503 while loading or stopping. */
export function checkModel(ctx: ServerContext, model: string): Engine {
  if (!ctx.config.modelIds.includes(model)) throw modelNotFound(model);
  const eng = ctx.engine();
  if (ctx.state() !== 'ready' || !eng) throw ctx.state() === 'loading' ? modelLoading() : shuttingDown();
  return eng;
}

/** Sends `err` in the protocol's shape (nothing when the reply has begun or the client left). */
export function sendProtocolError(res: ServerResponse, protocol: Pick<Protocol, 'errorBody'>, err: ApiError): void {
  sendJson(res, err.status, protocol.errorBody(err), { ...err.headers });
}

/** Token counts so far (read by the failure's access-log line too). */
interface Counts {
  prompt: number;
  cached: number;
  completion: number;
}

/**
 * Each choice's prompt tokens, computed once: the messages as the chat template renders them
 * (with the functions), or each raw prompt of a legacy request.
 */
function promptTokensOf(eng: Engine, body: CompletionRequest, constraints: Constraints): (choice: number) => Token[] {
  const functions = constraints.functionCalling?.functions;
  const prompts = body.prompts;
  if (!prompts) {
    const tokens = eng.requestTokens(body, functions);
    return () => tokens;
  }
  const each = prompts.map((prompt) => eng.requestTokens({ messages: [], prompt }));
  return (i) => each[i % each.length] ?? [];
}

/** The n choices one after another on the one sequence `held` (its cache keeps the prompt). */
async function generateChoices(
  eng: Engine,
  held: number,
  body: CompletionRequest,
  out: Output,
  signal: AbortSignal,
  constraints: Constraints,
  tokensOf: (choice: number) => Token[],
  counts: Counts,
  onFirstToken: () => void,
  onPrompt: (tokens: number, cached: number, restored: number) => void,
): Promise<GeneratedChoice[]> {
  const choices: GeneratedChoice[] = [];
  let generated = 0;
  let first = true;
  for (let i = 0; i < body.n; i++) {
    const result = await eng.complete(held, {
      messages: body.messages,
      maxTokens: body.maxTokens,
      temperature: body.temperature,
      topP: body.topP,
      topK: body.topK ?? null,
      // llama.cpp's default seed is the current second: requests without one would repeat
      // each other. With a seed, choice i samples with seed + i (reproducible, and distinct).
      seed: body.seed === null ? randomInt(0x1_0000_0000) : (body.seed + i) >>> 0,
      stop: body.stop,
      frequencyPenalty: body.frequencyPenalty,
      presencePenalty: body.presencePenalty,
      ...(body.prompts ? { prompt: body.prompts[i % body.prompts.length] ?? '' } : {}),
      signal,
      promptTokens: tokensOf(i),
      ...constraints,
      onTokens: (count: number) => {
        if (first) {
          first = false;
          onFirstToken();
        }
        counts.completion = generated + count;
      },
      ...(body.stream
        ? {
            onText: (text: string) => {
              if (text !== '') out.text(i, text);
            },
            onCallText: (callIndex: number, name: string, text: string) => out.callText(i, callIndex, name, text),
          }
        : {}),
    });
    generated += result.completionTokens;
    counts.completion = generated;
    // Several prompts (legacy completions) each count; n choices of one prompt count it once (as
    // OpenAI does), with what its first evaluation reused.
    if (i === 0 || (body.prompts?.length ?? 1) > 1) {
      counts.prompt += result.promptTokens;
      counts.cached += result.cachedTokens;
      onPrompt(result.promptTokens, result.cachedTokens, result.restoredTokens);
    }
    const choice: GeneratedChoice = {
      text: result.text,
      finishReason: result.finishReason,
      calls: result.calls,
      stopSequence: result.stopSequence,
    };
    choices.push(choice);
    if (body.stream) out.endChoice(i, choice);
  }
  return choices;
}

/** The access-log fields of a completed request (`request completed`, which the guardian reads). */
function completedFields(body: CompletionRequest, choices: readonly GeneratedChoice[], counts: Counts) {
  return {
    model: body.model,
    stream: body.stream,
    finish_reason: [...new Set(choices.map((c) => c.finishReason))].join(','),
    prompt_tokens: counts.prompt,
    cached_tokens: counts.cached,
    completion_tokens: counts.completion,
    tokens: counts.prompt + counts.completion,
  };
}

/**
 * What a request needs before it generates: its constraints (a grammar is built in the worker,
 * raced against the request's end: it does not hold the request past its deadline, its client or
 * the shutdown), its prompt tokens (computed once), and a slot: the one whose sequence shares the
 * longest prefix with them. The slot is the caller's to release.
 */
async function prepare(
  ctx: ServerContext,
  eng: Engine,
  body: CompletionRequest,
  end: RequestAbort,
): Promise<{ constraints: Constraints; tokensOf: (choice: number) => Token[]; held: number }> {
  const { scheduler } = ctx;
  const building = constraintsFor(eng, body);
  building.catch(() => {});
  const constraints = await Promise.race([building, end.aborted]);
  const tokensOf = promptTokensOf(eng, body, constraints);
  const first = tokensOf(0);
  const held = await scheduler.acquire(end.signal, (slot) => eng.cachedPrefix(slot, first), first.length);
  if (end.signal.aborted) {
    scheduler.release(held);
    throw end.signal.reason;
  }
  end.signal.addEventListener('abort', () => scheduler.noteAborted(held), { once: true });
  return { constraints, tokensOf, held };
}

/** Serves one generating request of `protocol`; never rejects. */
export async function serveGeneration<R extends CompletionRequest>(
  ctx: ServerContext,
  protocol: Protocol<R>,
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
): Promise<void> {
  const { config, scheduler } = ctx;
  const started = Date.now();
  let body: R;
  try {
    body = await protocol.parse(await readJson(ctx, req), req);
    checkModel(ctx, body.model);
  } catch (err) {
    const e = protocol.error(err);
    sendProtocolError(res, protocol, e);
    ctx.access(req, listener, startedNs, e.status, { error: e.wireCode });
    return;
  }
  const eng = ctx.engine()!;
  const end = requestAbort(ctx, res);
  let streaming = false;
  const counts: Counts = { prompt: 0, cached: 0, completion: 0 };
  let lastWrite = Date.now();
  const write = (text: string) => {
    if (!res.destroyed && !res.writableEnded) {
      res.write(text);
      lastWrite = Date.now();
    }
  };
  const out = protocol.output(body, write);
  // While the prompt is evaluated (or the model is slow) a stream that has sent nothing for a
  // while gets an SSE comment, so that proxies and clients do not give up on it.
  let keepAlive: NodeJS.Timeout | undefined;
  try {
    const { constraints, tokensOf, held } = await prepare(ctx, eng, body, end);
    if (body.stream) {
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      streaming = true;
      out.begin();
      const every = config.sseKeepAliveMs;
      if (every > 0) {
        keepAlive = setInterval(() => {
          if (Date.now() - lastWrite >= every) write(': keep-alive\n\n');
        }, every);
      }
    }
    const generation = generateChoices(
      eng,
      held,
      body,
      out,
      end.signal,
      constraints,
      tokensOf,
      counts,
      () => ctx.metrics.firstToken(Number(process.hrtime.bigint() - startedNs) / 1e9),
      (tokens, cached, restored) => ctx.metrics.prompt(tokens, cached, restored),
    );
    // The sequence is given back when the generation has really ended, not before.
    generation.then(
      () => scheduler.release(held, Date.now() - started),
      () => scheduler.release(held),
    );
    const choices = await Promise.race([generation, end.aborted]);
    ctx.metrics.tokens(counts.prompt, counts.completion);
    const answer = out.finish({
      choices,
      promptTokens: counts.prompt,
      completionTokens: counts.completion,
      cachedTokens: counts.cached,
    });
    if (streaming) res.end();
    else sendJson(res, 200, answer);
    ctx.access(req, listener, startedNs, 200, completedFields(body, choices, counts), PRIMARY_SUCCESS_MARKER);
  } catch (err) {
    const e = protocol.error(err);
    if (e.status >= 500 && e.wireCode !== 'shutting_down') {
      ctx.logger.warn('completion failed', { path: req.url, status: e.status, error: e.message });
    }
    if (streaming) {
      out.fail(e);
      if (!res.destroyed) res.end();
    } else if (e.status !== 499) {
      sendProtocolError(res, protocol, e);
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
        error: e.wireCode,
        // The prompt's size tells an operator why it did not fit.
        ...(err instanceof ContextLengthError ? { prompt_tokens: err.promptTokens } : {}),
        completion_tokens: counts.completion,
        tokens: counts.prompt + counts.completion,
      },
      'request failed',
    );
  } finally {
    end.done();
    clearInterval(keepAlive);
  }
}

/**
 * The OpenAI-compatible surface: request validation (spec 2.4 plus what OpenAI clients send),
 * response and chunk shapes, and errors in OpenAI's shape `{"error":{message,type,param,code}}`.
 * Pure: no I/O.
 */
import { randomBytes } from 'node:crypto';
import type { ChatCompletion, ChatUsage, FinishReason, ModelList } from '@vigil/shared-types';
import type { CompletionMessage, CompletionSettings } from './engine.js';
import { ApiError, ContextLengthError, EndReason, QueueFullError } from './errors.js';

export const invalid = (message: string, param: string | null = null, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, code);

/** A validated chat completion request. */
export interface CompletionRequest extends CompletionSettings {
  readonly model: string;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const absent = (v: unknown) => v === undefined || v === null;

function optNumber(body: Record<string, unknown>, key: string, min: number, max: number): number | null {
  const v = body[key];
  if (absent(v)) return null;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${key} must be a number`, key, 'invalid_type');
  if (v < min || v > max) throw invalid(`${key} must be between ${min} and ${max}, got ${v}`, key, 'invalid_value');
  return v;
}

function optInteger(body: Record<string, unknown>, key: string, min: number): number | null {
  const v = body[key];
  if (absent(v)) return null;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw invalid(`${key} must be an integer`, key, 'invalid_type');
  if (v < min) throw invalid(`${key} must be at least ${min}, got ${v}`, key, 'invalid_value');
  return v;
}

function messageContent(v: unknown, i: number, role: string): string {
  const param = `messages[${i}].content`;
  if (typeof v === 'string') return v;
  if (absent(v) && role === 'assistant') return '';
  if (Array.isArray(v)) {
    return v
      .map((part, j) => {
        if (!isObject(part) || part.type !== 'text' || typeof part.text !== 'string') {
          throw invalid(`${param}[${j}]: only text parts ({"type":"text","text":…}) are supported`, param);
        }
        return part.text;
      })
      .join('');
  }
  throw invalid(`${param} must be a string or an array of text parts`, param, 'invalid_type');
}

/** Validates a parsed JSON body. Throws ApiError (400). */
export function parseCompletionRequest(body: unknown): CompletionRequest {
  if (!isObject(body)) throw invalid('The request body must be a JSON object.');
  const model = body.model;
  if (absent(model)) throw invalid('you must provide a model parameter', 'model', 'missing_required_parameter');
  if (typeof model !== 'string' || model === '') throw invalid('model must be a non-empty string', 'model');
  const raw = body.messages;
  if (!Array.isArray(raw)) throw invalid('messages must be an array', 'messages', 'invalid_type');
  if (raw.length === 0) throw invalid('messages must contain at least one message', 'messages', 'empty_array');
  const messages: CompletionMessage[] = raw.map((m, i) => {
    if (!isObject(m)) throw invalid(`messages[${i}] must be an object`, `messages[${i}]`, 'invalid_type');
    const role = m.role;
    if (role !== 'system' && role !== 'developer' && role !== 'user' && role !== 'assistant') {
      throw invalid(
        `messages[${i}].role must be one of system, developer, user, assistant; got ${JSON.stringify(role)}`,
        `messages[${i}].role`,
        'invalid_value',
      );
    }
    const content = messageContent(m.content, i, role);
    return { role: role === 'developer' ? 'system' : role, content };
  });
  const maxCompletion = optInteger(body, 'max_completion_tokens', 1);
  const maxTokens = maxCompletion ?? optInteger(body, 'max_tokens', 1);
  const temperature = optNumber(body, 'temperature', 0, 2) ?? 1;
  const topP = optNumber(body, 'top_p', 0, 1) ?? 1;
  const seedRaw = body.seed;
  if (!absent(seedRaw) && (typeof seedRaw !== 'number' || !Number.isInteger(seedRaw))) {
    throw invalid('seed must be an integer', 'seed', 'invalid_type');
  }
  const seed = absent(seedRaw) ? null : (seedRaw as number) >>> 0;
  let stop: string[] = [];
  const s = body.stop;
  if (typeof s === 'string') stop = [s];
  else if (Array.isArray(s)) {
    if (s.length > 4) throw invalid('stop may have at most 4 sequences', 'stop');
    if (!s.every((x) => typeof x === 'string')) throw invalid('stop must be a string or an array of strings', 'stop');
    stop = s as string[];
  } else if (!absent(s)) throw invalid('stop must be a string or an array of strings', 'stop', 'invalid_type');
  stop = stop.filter((x) => x !== '');
  const streamRaw = body.stream;
  if (!absent(streamRaw) && typeof streamRaw !== 'boolean') throw invalid('stream must be a boolean', 'stream');
  const stream = streamRaw === true;
  const so = body.stream_options;
  let includeUsage = false;
  if (!absent(so)) {
    if (!stream) {
      throw invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options');
    }
    if (!isObject(so)) throw invalid('stream_options must be an object', 'stream_options', 'invalid_type');
    includeUsage = so.include_usage === true;
  }
  const n = optInteger(body, 'n', 1);
  if (n !== null && n !== 1) throw invalid('only n=1 is supported', 'n', 'unsupported_value');
  if (Array.isArray(body.tools) && body.tools.length > 0) throw invalid('tools are not supported', 'tools');
  if (Array.isArray(body.functions) && body.functions.length > 0) {
    throw invalid('functions are not supported', 'functions');
  }
  if (body.logprobs === true) throw invalid('logprobs are not supported', 'logprobs');
  const rf = body.response_format;
  if (!absent(rf) && !(isObject(rf) && rf.type === 'text')) {
    throw invalid('only response_format {"type":"text"} is supported', 'response_format');
  }
  return {
    model,
    messages,
    maxTokens,
    temperature,
    topP,
    seed,
    stop,
    stream,
    includeUsage,
    frequencyPenalty: optNumber(body, 'frequency_penalty', -2, 2) ?? 0,
    presencePenalty: optNumber(body, 'presence_penalty', -2, 2) ?? 0,
  };
}

export function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString('hex')}`;
}

export function usage(prompt: number, completion: number): ChatUsage {
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export function completionBody(
  id: string,
  created: number,
  model: string,
  content: string,
  finishReason: FinishReason,
  u: ChatUsage,
): ChatCompletion {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
    usage: u,
  };
}

export interface ChatCompletionChunk {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly choices: readonly {
    readonly index: number;
    readonly delta: { readonly role?: 'assistant'; readonly content?: string };
    readonly finish_reason: FinishReason | null;
  }[];
  readonly usage?: ChatUsage | null;
}

export function chunk(
  id: string,
  created: number,
  model: string,
  delta: { role?: 'assistant'; content?: string },
  finishReason: FinishReason | null = null,
): ChatCompletionChunk {
  return {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  };
}

export function usageChunk(id: string, created: number, model: string, u: ChatUsage): ChatCompletionChunk {
  return { id, object: 'chat.completion.chunk', created, model, choices: [], usage: u };
}

export function modelList(ids: readonly string[], created: number): ModelList {
  return { object: 'list', data: ids.map((id) => ({ id, object: 'model', created, owned_by: 'vigil' })) };
}

export const modelNotFound = (model: string): ApiError =>
  new ApiError(
    404,
    `The model \`${model}\` does not exist or you do not have access to it.`,
    'invalid_request_error',
    'model',
    'model_not_found',
  );

// Errors in OpenAI's shape, as the routes and the completion flow answer them.

export const shuttingDown = (): ApiError =>
  new ApiError(503, 'The server is shutting down.', 'server_error', null, 'shutting_down', { 'retry-after': '5' });

export const modelLoading = (): ApiError =>
  new ApiError(503, 'The model is still loading. Retry shortly.', 'server_error', null, 'model_loading', {
    'retry-after': '2',
  });

export const invalidJson = (): ApiError =>
  invalid(
    'We could not parse the JSON body of your request. The body must be a JSON object (Content-Type: application/json).',
    null,
    'invalid_json',
  );

export const bodyTooLarge = (limit: number): ApiError =>
  new ApiError(413, `The request body is larger than ${limit} bytes.`, 'invalid_request_error', null, 'body_too_large');

export const clientClosed = (message = 'The client closed the connection.'): ApiError =>
  new ApiError(499, message, 'client_closed', null, 'client_closed');

export const misdirected = (host: string): ApiError =>
  new ApiError(
    421,
    `Misdirected request: Host ${host} is not served here.`,
    'invalid_request_error',
    null,
    'misdirected',
  );

/** 405; `use` is added to the message when the path takes one method (": use POST."). */
export const methodNotAllowed = (method: string | undefined, path: string, allow: string, use = false): ApiError =>
  new ApiError(
    405,
    `Method ${method} is not allowed on ${path}${use ? `: use ${allow}` : ''}.`,
    'invalid_request_error',
    null,
    'method_not_allowed',
    { allow },
  );

export const unknownUrl = (method: string | undefined, path: string): ApiError =>
  new ApiError(404, `Unknown request URL: ${method} ${path}.`, 'invalid_request_error', null, 'unknown_url');

/** The OpenAI-shaped error for anything a completion can end with. */
export function toApiError(err: unknown): ApiError {
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
    return clientClosed(err.message);
  }
  return new ApiError(
    500,
    `The model failed: ${(err as Error)?.message ?? String(err)}`,
    'server_error',
    null,
    'internal_error',
  );
}

/**
 * The OpenAI-compatible surface: response and chunk shapes (the request's validation is in
 * request.ts), and errors in OpenAI's shape `{"error":{message,type,param,code}}`.
 * Pure: no I/O.
 */
import { randomBytes } from 'node:crypto';
import type { ChatCompletion, ChatUsage, FinishReason, ModelList, ToolCall } from '@vigil/shared-types';

export type { FinishReason };

import {
  ApiError,
  ContextLengthError,
  EndReason,
  INFERENCE_ERRORS,
  invalid,
  QueueFullError,
  type VigilError,
} from './errors.js';

export { invalid } from './errors.js';
export { type CompletionRequest, parseCompletionRequest } from './request.js';

export function completionId(): string {
  return `chatcmpl-${randomBytes(12).toString('hex')}`;
}

/** Usage as OpenAI reports it; `cached`: prompt tokens reused from an earlier evaluation. */
export function usage(prompt: number, completion: number, cached = 0): ChatUsage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

/** Why a choice ended: OpenAI's reasons this server gives. */

/** A call in a reply: OpenAI's shape, `arguments` as JSON text. */
export type ToolCallOut = ToolCall;

/** One generated choice. */
export interface Choice {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly toolCalls: readonly ToolCallOut[];
}

export type ChatCompletionBody = ChatCompletion;

export function toolCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

export function completionBody(
  id: string,
  created: number,
  model: string,
  choices: readonly Choice[],
  u: ChatUsage,
): ChatCompletionBody {
  return {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: choices.map((c, index) => ({
      index,
      // As OpenAI: content null when the model only called tools.
      message:
        c.toolCalls.length > 0
          ? { role: 'assistant', content: c.text === '' ? null : c.text, tool_calls: c.toolCalls }
          : { role: 'assistant', content: c.text },
      finish_reason: c.finishReason,
    })),
    usage: u,
  };
}

/** A piece of a streamed tool call: the first of a call has its id, type and name. */
export interface ToolCallDelta {
  readonly index: number;
  readonly id?: string;
  readonly type?: 'function';
  readonly function: { readonly name?: string; readonly arguments: string };
}

export interface Delta {
  readonly role?: 'assistant';
  readonly content?: string | null;
  readonly tool_calls?: readonly ToolCallDelta[];
}

export interface ChatCompletionChunk {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly choices: readonly {
    readonly index: number;
    readonly delta: Delta;
    readonly finish_reason: FinishReason | null;
  }[];
  readonly usage?: ChatUsage | null;
}

export function chunk(
  id: string,
  created: number,
  model: string,
  delta: Delta,
  finishReason: FinishReason | null = null,
  index = 0,
): ChatCompletionChunk {
  return {
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index, delta, finish_reason: finishReason }],
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

/** 401 on the plain listener when `--api-key-file` is set and the request lacks the key. */
export const invalidApiKey = (given: boolean): ApiError =>
  new ApiError(
    401,
    given
      ? 'Incorrect API key provided. Send the key of --api-key-file as "Authorization: Bearer KEY" or "x-api-key: KEY".'
      : 'You didn\'t provide an API key. Send it as "Authorization: Bearer KEY" or "x-api-key: KEY" (the key of --api-key-file).',
    'invalid_request_error',
    null,
    'invalid_api_key',
    { 'www-authenticate': 'Bearer' },
  );

export const unknownUrl = (method: string | undefined, path: string): ApiError =>
  new ApiError(404, `Unknown request URL: ${method} ${path}.`, 'invalid_request_error', null, 'unknown_url');

/** The OpenAI-shaped error of a catalogued error: its HTTP status and OpenAI code from the catalogue. */
function answer(err: VigilError, type: string, param: string | null = null, headers: Record<string, string> = {}) {
  const spec = INFERENCE_ERRORS[err.code as keyof typeof INFERENCE_ERRORS];
  return new ApiError(spec?.http ?? 500, err.message, type, param, spec?.wire ?? null, headers);
}

/** The OpenAI-shaped error for anything a completion can end with. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof QueueFullError) {
    return answer(err, 'rate_limit_exceeded', null, { 'retry-after': String(err.retryAfterS) });
  }
  if (err instanceof ContextLengthError) return answer(err, 'invalid_request_error', 'messages');
  if (err instanceof EndReason) {
    if (err.kind === 'timeout') return answer(err, 'timeout');
    if (err.kind === 'shutdown') return answer(err, 'server_error', null, { 'retry-after': '5' });
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

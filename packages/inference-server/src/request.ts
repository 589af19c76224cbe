/**
 * The chat completion request: one zod schema of every field OpenAI's API documents (the types
 * are derived from it), checked in one pass. A field of the wrong type or out of range is a 400
 * naming it (`param`), as OpenAI answers; fields this server does not know are ignored, as
 * OpenAI ignores them. Pure: no I/O.
 */
import { z } from '@vigil/shared-types';
import type { CompletionMessage, CompletionSettings } from './engine.js';
import { ApiError } from './errors.js';

export const invalid = (message: string, param: string | null = null, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, code);

/** A validated chat completion request. */
export interface CompletionRequest extends CompletionSettings {
  readonly model: string;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

const textPart = z.object({ type: z.literal('text'), text: z.string() });
const contentSchema = z.union([z.string(), z.array(textPart)]);
const messageSchema = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant']),
  content: contentSchema.nullish(),
  name: z.string().nullish(),
});
const objectOrString = z.union([z.string(), z.record(z.string(), z.unknown())]);
const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().int().min(min).max(max).nullish();
const number = (min: number, max: number) => z.number().min(min).max(max).nullish();

/** Every field of OpenAI's chat completion request, in the order they are reported. */
export const chatCompletionSchema = z.object({
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  max_completion_tokens: integer(1),
  max_tokens: integer(1),
  temperature: number(0, 2),
  top_p: number(0, 1),
  frequency_penalty: number(-2, 2),
  presence_penalty: number(-2, 2),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  n: integer(1, 128),
  tools: z.array(z.record(z.string(), z.unknown())).nullish(),
  tool_choice: objectOrString.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  functions: z.array(z.record(z.string(), z.unknown())).nullish(),
  function_call: objectOrString.nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: integer(0, 20),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  response_format: z.object({ type: z.string() }).nullish(),
  user: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  store: z.boolean().nullish(),
  service_tier: z.string().nullish(),
  reasoning_effort: z.string().nullish(),
  verbosity: z.string().nullish(),
  modalities: z.array(z.string()).nullish(),
  prompt_cache_key: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prediction: z.record(z.string(), z.unknown()).nullish(),
  audio: z.record(z.string(), z.unknown()).nullish(),
  web_search_options: z.record(z.string(), z.unknown()).nullish(),
});

export type ChatCompletionBody = z.output<typeof chatCompletionSchema>;

/** `messages[0].content` from zod's path. */
export function paramName(path: readonly PropertyKey[]): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `${s === '' ? '' : '.'}${String(p)}`;
  return s;
}

/** What a JSON value is, in OpenAI's words. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : 'a decimal';
  return `a ${typeof v}`;
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  record: 'an object',
};

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let v = body;
  for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[p] : undefined;
  return v;
}

/** The first problem zod found, as OpenAI's 400. */
function toInvalid(issue: z.core.$ZodIssue, body: unknown): ApiError {
  const param = paramName(issue.path);
  const value = valueAt(body, issue.path);
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined)
        return invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
      return invalid(
        `Invalid type for '${param}': expected ${EXPECTED[issue.expected] ?? issue.expected}, but got ${kindOf(value)} instead.`,
        param,
        'invalid_type',
      );
    case 'invalid_union':
      if (param.endsWith('.content')) {
        return invalid(
          `Invalid '${param}': expected a string or an array of text parts ({"type":"text","text":…}); other parts are not supported.`,
          param,
          'invalid_type',
        );
      }
      return invalid(`Invalid type for '${param}': got ${kindOf(value)}.`, param, 'invalid_type');
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? `at least ${issue.minimum}` : `at most ${issue.maximum}`;
      if (issue.origin === 'array') {
        const code =
          issue.code === 'too_small' && Array.isArray(value) && value.length === 0 ? 'empty_array' : 'invalid_value';
        return invalid(
          `Invalid '${param}': must have ${bound} items, got ${(value as unknown[]).length}.`,
          param,
          code,
        );
      }
      if (issue.origin === 'string') return invalid(`Invalid '${param}': must not be empty.`, param, 'invalid_value');
      return invalid(`Invalid '${param}': must be ${bound}, got ${String(value)}.`, param, 'invalid_value');
    }
    case 'invalid_value':
      return invalid(
        `Invalid '${param}': must be one of ${issue.values.map(String).join(', ')}; got ${JSON.stringify(value)}.`,
        param,
        'invalid_value',
      );
    default:
      return invalid(`Invalid '${param}': ${issue.message}.`, param, 'invalid_value');
  }
}

const unsupported = (message: string, param: string) => invalid(message, param, 'unsupported_value');

function messageText(m: ChatCompletionBody['messages'][number], i: number): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => p.text).join('');
  if (m.role === 'assistant') return '';
  const param = `messages[${i}].content`;
  throw invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
}

/** Validates a parsed JSON body. Throws ApiError (400 naming the field). */
export function parseCompletionRequest(raw: unknown): CompletionRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw invalid('The request body must be a JSON object.', null, 'invalid_type');
  }
  const parsed = chatCompletionSchema.safeParse(raw);
  if (!parsed.success) throw toInvalid(parsed.error.issues[0]!, raw);
  const body = parsed.data;
  if (body.n !== null && body.n !== undefined && body.n !== 1) throw unsupported('only n=1 is supported', 'n');
  if (body.tools && body.tools.length > 0) throw unsupported('tools are not supported', 'tools');
  if (body.functions && body.functions.length > 0) throw unsupported('functions are not supported', 'functions');
  if (body.logprobs === true) throw unsupported('logprobs are not supported', 'logprobs');
  if (body.response_format && body.response_format.type !== 'text') {
    throw unsupported('only response_format {"type":"text"} is supported', 'response_format');
  }
  const stream = body.stream === true;
  if (body.stream_options && !stream) {
    throw invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options');
  }
  const stop = (typeof body.stop === 'string' ? [body.stop] : (body.stop ?? [])).filter((s) => s !== '');
  return {
    model: body.model,
    messages: body.messages.map(
      (m, i): CompletionMessage => ({ role: m.role === 'developer' ? 'system' : m.role, content: messageText(m, i) }),
    ),
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? null,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed === null || body.seed === undefined ? null : body.seed >>> 0,
    stop,
    stream,
    includeUsage: body.stream_options?.include_usage === true,
    frequencyPenalty: body.frequency_penalty ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
  };
}

/**
 * The chat completion request: one zod schema of every field OpenAI's API documents (the types
 * are derived from it), checked in one pass. A field of the wrong type or out of range is a 400
 * naming it (`param`), as OpenAI answers; fields this server does not know are ignored, as
 * OpenAI ignores them. Pure: no I/O.
 */
import { z } from '@vigil/shared-types';
import type { CompletionSettings } from './engine-types.js';
import { invalid } from './errors.js';
import type { CompletionMessage, ToolSpec } from './history.js';
import { checkStop, checkTools, DEFAULT_INPUT_LIMITS, type InputLimits } from './limits.js';
import { toGrammarSchema } from './schema.js';
import { toInvalid } from './zod-issues.js';

/** `tool_choice`: the model decides, never calls, must call one, or must call this one. */
export type ToolChoice = 'auto' | 'none' | 'required' | { readonly name: string };

/** What the answer's text must be: free, a JSON object, or JSON valid against a schema. */
export type ResponseFormat =
  | { readonly type: 'text' }
  | { readonly type: 'json_object' }
  | {
      readonly type: 'json_schema';
      readonly name: string;
      readonly schema: Record<string, unknown>;
      /** The field that holds the schema, named in errors; absent: chat's `response_format.json_schema.schema`. */
      readonly param?: string;
    };

/** A validated chat completion request. */
export interface CompletionRequest extends CompletionSettings {
  readonly model: string;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** Choices to generate (1 to --max-n). */
  readonly n: number;
  readonly tools: readonly ToolSpec[];
  readonly toolChoice: ToolChoice;
  readonly parallelToolCalls: boolean;
  readonly responseFormat: ResponseFormat;
  /** Legacy completions: the raw prompt of each choice (no chat template); absent: `messages`. */
  readonly prompts?: readonly string[];
}

/** What the server allows beyond the schema. */
export interface RequestLimits {
  readonly maxN: number;
  /** Stop strings, schemas, tools (limits.ts); default DEFAULT_INPUT_LIMITS. */
  readonly input?: InputLimits;
}

const textPart = z.object({ type: z.literal('text'), text: z.string() });
const contentSchema = z.union([z.string(), z.array(textPart)]);
const toolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function').nullish(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
const messageSchema = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: contentSchema.nullish(),
  name: z.string().nullish(),
  tool_calls: z.array(toolCallSchema).nullish(),
  tool_call_id: z.string().nullish(),
});
const toolSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string(),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) }),
]);
const responseFormatSchema = z.union([
  z.object({ type: z.enum(['text', 'json_object']) }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: z.string(),
      description: z.string().nullish(),
      schema: z.record(z.string(), z.unknown()).nullish(),
      strict: z.boolean().nullish(),
    }),
  }),
]);
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
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  functions: z.array(z.record(z.string(), z.unknown())).nullish(),
  function_call: objectOrString.nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: integer(0, 20),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  response_format: responseFormatSchema.nullish(),
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

const unsupported = (message: string, param: string) => invalid(message, param, 'unsupported_value');

function messageText(m: ChatCompletionBody['messages'][number], i: number): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.map((p) => p.text).join('');
  if (m.role === 'assistant') return '';
  const param = `messages[${i}].content`;
  throw invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
}

/** OpenAI's rule for function names. */
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * One function tool of any protocol, checked: its name (OpenAI's rule, not twice: `names` holds
 * the ones before it) and its parameters' schema for the grammar. `param` names it in errors.
 */
export function checkTool(
  t: { readonly name: string; readonly description?: string | null; readonly parameters?: unknown },
  param: string,
  names: Set<string>,
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): ToolSpec {
  const { name } = t;
  if (!TOOL_NAME.test(name)) {
    throw invalid(
      `Invalid '${param}.name': must be 1 to 64 of a-z, A-Z, 0-9, _ and -; got ${JSON.stringify(name)}.`,
      `${param}.name`,
      'invalid_value',
    );
  }
  if (names.has(name)) {
    throw invalid(`Invalid '${param}.name': the function ${name} is listed twice.`, `${param}.name`, 'invalid_value');
  }
  names.add(name);
  const p = t.parameters;
  const parameters =
    p !== null && typeof p === 'object' && Object.keys(p).length > 0
      ? toGrammarSchema(p, `${param}.parameters`, limits)
      : null;
  return { name, description: t.description ?? null, parameters };
}

/**
 * Checks a `tools` array of any protocol within the limits: its count before any tool is walked,
 * then each tool (`each`, which bounds its schema's depth), then the array's bytes.
 */
export function checkToolList<T>(tools: readonly unknown[], limits: InputLimits, each: () => T): T {
  if (tools.length > limits.maxTools) checkTools(tools, limits);
  const checked = each();
  checkTools(tools, limits);
  return checked;
}

function parseTools(body: ChatCompletionBody, limits: InputLimits): { tools: ToolSpec[]; toolChoice: ToolChoice } {
  const names = new Set<string>();
  const tools = checkToolList(body.tools ?? [], limits, () =>
    (body.tools ?? []).map((t, i) => checkTool(t.function, `tools[${i}].function`, names, limits)),
  );
  const c = body.tool_choice;
  if (c !== null && c !== undefined && tools.length === 0) {
    throw invalid(
      "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
      'tool_choice',
    );
  }
  let toolChoice: ToolChoice = tools.length > 0 ? 'auto' : 'none';
  if (typeof c === 'string') toolChoice = c;
  else if (c) {
    if (!names.has(c.function.name)) {
      throw invalid(
        `Invalid 'tool_choice': the function ${JSON.stringify(c.function.name)} is not in 'tools'.`,
        'tool_choice.function.name',
        'invalid_value',
      );
    }
    toolChoice = { name: c.function.name };
  }
  return { tools, toolChoice };
}

function parseResponseFormat(body: ChatCompletionBody, limits: InputLimits): ResponseFormat {
  const f = body.response_format;
  if (!f || f.type === 'text') return { type: 'text' };
  if (f.type === 'json_object') return { type: 'json_object' };
  const param = 'response_format.json_schema.schema';
  if (!('json_schema' in f) || !f.json_schema.schema) {
    throw invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
  }
  return {
    type: 'json_schema',
    name: f.json_schema.name,
    schema: toGrammarSchema(f.json_schema.schema, param, limits),
  };
}

/** The conversation, with each tool message checked against the calls before it. */
function parseMessages(body: ChatCompletionBody): CompletionMessage[] {
  const calls = new Set<string>();
  return body.messages.map((m, i): CompletionMessage => {
    if (m.role === 'tool') {
      const param = `messages[${i}].tool_call_id`;
      if (!m.tool_call_id) throw invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
      if (!calls.has(m.tool_call_id)) {
        throw invalid(
          `Invalid '${param}': messages with role 'tool' must answer a preceding assistant message's 'tool_calls'; no call has the id ${JSON.stringify(m.tool_call_id)}.`,
          param,
          'invalid_value',
        );
      }
      return { role: 'tool', content: messageText(m, i), toolCallId: m.tool_call_id };
    }
    if (m.role === 'assistant' && m.tool_calls && m.tool_calls.length > 0) {
      for (const c of m.tool_calls) calls.add(c.id);
      return {
        role: 'assistant',
        content: messageText(m, i),
        toolCalls: m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
      };
    }
    return { role: m.role === 'developer' ? 'system' : m.role, content: messageText(m, i) };
  });
}

/** Validates a parsed JSON body. Throws ApiError (400 naming the field). */
export function parseCompletionRequest(raw: unknown, limits: RequestLimits = { maxN: 4 }): CompletionRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw invalid('The request body must be a JSON object.', null, 'invalid_type');
  }
  const parsed = chatCompletionSchema.safeParse(raw);
  if (!parsed.success) throw toInvalid(parsed.error.issues[0]!, raw);
  const body = parsed.data;
  const n = body.n ?? 1;
  if (n > limits.maxN) {
    throw invalid(
      `Invalid 'n': at most ${limits.maxN} choices per request on this server (--max-n); got ${n}.`,
      'n',
      'invalid_value',
    );
  }
  if (body.functions && body.functions.length > 0) {
    throw unsupported("'functions' (deprecated) is not supported: use 'tools'", 'functions');
  }
  if (body.logprobs === true) throw unsupported('logprobs are not supported', 'logprobs');
  const input = limits.input ?? DEFAULT_INPUT_LIMITS;
  const { tools, toolChoice } = parseTools(body, input);
  const responseFormat = parseResponseFormat(body, input);
  if (responseFormat.type !== 'text' && toolChoice !== 'none') {
    throw unsupported(
      "'response_format' other than text together with 'tools' is not supported, unless 'tool_choice' is \"none\"",
      'response_format',
    );
  }
  const stream = body.stream === true;
  if (body.stream_options && !stream) {
    throw invalid("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options');
  }
  const stop = (typeof body.stop === 'string' ? [body.stop] : (body.stop ?? [])).filter((s) => s !== '');
  checkStop(stop, input);
  return {
    model: body.model,
    messages: parseMessages(body),
    maxTokens: body.max_completion_tokens ?? body.max_tokens ?? null,
    temperature: body.temperature ?? 1,
    topP: body.top_p ?? 1,
    seed: body.seed === null || body.seed === undefined ? null : body.seed >>> 0,
    stop,
    stream,
    includeUsage: body.stream_options?.include_usage === true,
    frequencyPenalty: body.frequency_penalty ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    n,
    tools,
    toolChoice,
    parallelToolCalls: body.parallel_tool_calls !== false,
    responseFormat,
  };
}

/**
 * POST /v1/responses (OpenAI's Responses API) as the engine's one request: `instructions` and the
 * input items (messages, `function_call`, `function_call_output`) become the conversation,
 * `tools` of type `function` and `namespace` the functions the model sees (a namespaced function
 * is offered as `namespace__name` and called back with `namespace` and `name`), hosted tools are
 * left out (common.ts), `text.format` is the grammar. Fields that mean nothing for a local model
 * (`reasoning`, `include`, `prompt_cache_key`, …) are accepted and documented. Pure.
 */
import { z } from '@vigil/shared-types';
import { invalid } from '../errors.js';
import type { CompletionMessage, ToolCall, ToolSpec } from '../history.js';
import { checkSchemaShape, DEFAULT_INPUT_LIMITS, type InputLimits } from '../limits.js';
import { type CompletionRequest, checkTool, checkToolList, type ResponseFormat, type ToolChoice } from '../request.js';
import { toGrammarSchema } from '../schema.js';
import { check, type HostedTools, lenientSchema, objectAt } from './common.js';

/** Hosted tools of the Responses API: the server cannot run them; left out of what the model sees. */
export const RESPONSES_HOSTED_TOOLS: readonly string[] = [
  'web_search',
  'web_search_preview',
  'web_search_preview_2025_03_11',
  'web_search_2025_08_26',
  'file_search',
  'code_interpreter',
  'computer_use_preview',
  'computer',
  'image_generation',
  'mcp',
  'local_shell',
  'shell',
  'apply_patch',
  'tool_search',
];

/** Input content parts the model cannot take: a 400 naming them, never dropped. */
const MEDIA_PARTS = new Set(['input_image', 'input_file', 'input_audio']);

/** A function of a namespace, as the model sees it, and back. */
export interface ToolName {
  readonly name: string;
  readonly namespace: string | null;
}

/** A validated Responses request: the engine's request and what the answer echoes. */
export interface ResponsesRequest extends CompletionRequest {
  /** The conversation without the instructions (kept with a stored response). */
  readonly conversation: readonly CompletionMessage[];
  readonly instructions: string | null;
  readonly previousResponseId: string | null;
  readonly store: boolean;
  /** The model's function names → the Responses tool (namespaced or not). */
  readonly toolNames: ReadonlyMap<string, ToolName>;
  readonly echo: {
    readonly tools: readonly unknown[];
    readonly tool_choice: unknown;
    readonly text: unknown;
    readonly metadata: unknown;
    readonly max_output_tokens: number | null;
  };
}

const integer = (min: number) => z.number().int().min(min).nullish();
const number = (min: number, max: number) => z.number().min(min).max(max).nullish();

const top = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]),
  instructions: z.string().nullish(),
  max_output_tokens: integer(1),
  temperature: number(0, 2),
  top_p: number(0, 1),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().min(1).nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: z.boolean().nullish(),
  max_tool_calls: integer(1),
  text: z
    .object({
      format: z.object({ type: z.enum(['text', 'json_object', 'json_schema']) }).nullish(),
      verbosity: z.string().nullish(),
    })
    .nullish(),
  reasoning: z.record(z.string(), z.unknown()).nullish(),
  include: z.array(z.string()).nullish(),
  prompt_cache_key: z.string().nullish(),
  client_metadata: z.record(z.string(), z.unknown()).nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  service_tier: z.string().nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  truncation: z.enum(['auto', 'disabled']).nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  stream_options: z.record(z.string(), z.unknown()).nullish(),
  background: z.boolean().nullish(),
  conversation: z.unknown().optional(),
  prompt: z.unknown().optional(),
});
type Top = z.output<typeof top>;

const functionTool = z.object({
  type: z.literal('function'),
  name: z.string(),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
const namespaceTool = z.object({
  type: z.literal('namespace'),
  name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 of a-z, A-Z, 0-9, _ and -'),
  description: z.string().nullish(),
  tools: z.array(z.unknown()),
});
const textPart = z.object({ type: z.string(), text: z.string() });
const messageItem = z.object({
  type: z.literal('message').optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]),
});
const callItem = z.object({
  type: z.literal('function_call'),
  call_id: z.string().min(1),
  name: z.string().min(1),
  namespace: z.string().nullish(),
  arguments: z.string(),
});
const outputItem = z.object({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(textPart)]),
});

/** The model's name for a function of a namespace. */
export const flatName = (namespace: string | null, name: string): string =>
  namespace === null ? name : `${namespace}__${name}`;

/** `tools`: function and namespace tools as the model's functions; hosted tools left out. */
function parseTools(
  t: Top,
  root: unknown,
  hosted: HostedTools,
  limits: InputLimits,
): { tools: ToolSpec[]; names: Map<string, ToolName> } {
  const tools: ToolSpec[] = [];
  const names = new Map<string, ToolName>();
  const seen = new Set<string>();
  const one = (raw: unknown, path: (string | number)[], namespace: string | null) => {
    const f = check(functionTool, raw, root, path);
    const flat = flatName(namespace, f.name);
    // The shape within the limits before the schema is relaxed (and walked).
    checkSchemaShape(f.parameters, `${paramOf(path)}.parameters`, limits);
    const parameters = f.strict === true ? f.parameters : lenientSchema(f.parameters);
    tools.push(checkTool({ ...f, name: flat, parameters }, paramOf(path), seen, limits));
    names.set(flat, { name: f.name, namespace });
  };
  checkToolList(t.tools ?? [], limits, () => eachTool(t, root, hosted, one));
  return { tools, names };
}

/** Each entry of `tools`: a function (or a namespace's) to `one`; hosted tools left out. */
function eachTool(
  t: Top,
  root: unknown,
  hosted: HostedTools,
  one: (raw: unknown, path: (string | number)[], namespace: string | null) => void,
): void {
  (t.tools ?? []).forEach((raw, i) => {
    const type = objectAt(raw, `tools[${i}]`).type;
    if (type === 'function') one(raw, ['tools', i], null);
    else if (type === 'namespace') {
      const ns = check(namespaceTool, raw, root, ['tools', i]);
      ns.tools.forEach((inner, k) => {
        const kind = objectAt(inner, `tools[${i}].tools[${k}]`).type;
        if (kind !== 'function') throw unknownTool(`tools[${i}].tools[${k}].type`, kind);
        one(inner, ['tools', i, 'tools', k], ns.name);
      });
    } else if (typeof type === 'string' && RESPONSES_HOSTED_TOOLS.includes(type)) {
      hosted.leaveOut(type, `tools[${i}].type`, '/v1/responses');
    } else throw unknownTool(`tools[${i}].type`, type);
  });
}

const unknownTool = (param: string, type: unknown) =>
  invalid(
    `Invalid '${param}': ${JSON.stringify(type)} is not a tool type this server supports (function, namespace; hosted tools are left out).`,
    param,
    'unsupported_value',
  );

const paramOf = (path: readonly (string | number)[]) =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

function parseToolChoice(t: Top, tools: readonly ToolSpec[], names: ReadonlyMap<string, ToolName>): ToolChoice {
  const c = t.tool_choice;
  if (c === undefined || c === null) return tools.length > 0 ? 'auto' : 'none';
  if (c === 'auto' || c === 'none' || c === 'required') return tools.length > 0 ? c : 'none';
  const o = c as { type?: unknown; name?: unknown; namespace?: unknown };
  if (typeof c === 'object' && o.type === 'function' && typeof o.name === 'string') {
    const flat = flatName(typeof o.namespace === 'string' ? o.namespace : null, o.name);
    if (!names.has(flat)) {
      throw invalid(
        `Invalid 'tool_choice': the function ${JSON.stringify(o.name)} is not in 'tools'.`,
        'tool_choice.name',
      );
    }
    return { name: flat };
  }
  throw invalid(
    `Invalid 'tool_choice': expected "none", "auto", "required" or {"type":"function","name":…}.`,
    'tool_choice',
    'invalid_value',
  );
}

function parseFormat(t: Top, root: unknown, limits: InputLimits): ResponseFormat {
  const f = t.text?.format;
  if (!f || f.type === 'text') return { type: 'text' };
  if (f.type === 'json_object') return { type: 'json_object' };
  // zod kept only `type` of the format: the rest is read from the body itself.
  const raw = (root as { text: { format: unknown } }).text.format;
  const s = check(z.object({ name: z.string().min(1), schema: z.record(z.string(), z.unknown()) }), raw, root, [
    'text',
    'format',
  ]);
  const param = 'text.format.schema';
  return { type: 'json_schema', name: s.name, schema: toGrammarSchema(s.schema, param, limits), param };
}

/** The text of a message's content; media parts and unknown parts are a 400 naming them. */
function contentText(content: string | Record<string, unknown>[], param: string): string {
  if (typeof content === 'string') return content;
  return content
    .map((p, j) => {
      const type = p.type;
      if (type === 'input_text' || type === 'output_text' || type === 'text' || type === 'refusal') {
        const text = type === 'refusal' ? p.refusal : p.text;
        if (typeof text !== 'string') {
          throw invalid(`Invalid type for '${param}[${j}].text': expected a string.`, `${param}[${j}]`, 'invalid_type');
        }
        return text;
      }
      if (typeof type === 'string' && MEDIA_PARTS.has(type)) {
        throw invalid(
          `Invalid '${param}[${j}]': ${type} is not supported: the model on this server takes text only.`,
          `${param}[${j}].type`,
          'unsupported_value',
        );
      }
      throw invalid(
        `Invalid '${param}[${j}].type': ${JSON.stringify(type)} is not a content part type (input_text, output_text).`,
        `${param}[${j}].type`,
        'invalid_value',
      );
    })
    .join('');
}

/**
 * The input items as messages, appended to `before` (a stored conversation): consecutive
 * `function_call` items join one assistant turn; each `function_call_output` must answer a call.
 */
function parseInput(t: Top, root: unknown, before: readonly CompletionMessage[]): CompletionMessage[] {
  const out: CompletionMessage[] = [...before];
  const calls = new Set<string>();
  for (const m of before) if (m.role === 'assistant') for (const c of m.toolCalls ?? []) calls.add(c.id);
  if (typeof t.input === 'string') {
    out.push({ role: 'user', content: t.input });
    return out;
  }
  t.input.forEach((raw, i) => {
    const item = objectAt(raw, `input[${i}]`);
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    if (type === 'message') {
      const m = check(messageItem, item, root, ['input', i]);
      const content = contentText(m.content, `input[${i}].content`);
      if (m.role === 'assistant') out.push({ role: 'assistant', content });
      else out.push({ role: m.role === 'user' ? 'user' : 'system', content });
    } else if (type === 'function_call') {
      const c = check(callItem, item, root, ['input', i]);
      const call: ToolCall = { id: c.call_id, name: flatName(c.namespace ?? null, c.name), arguments: c.arguments };
      calls.add(c.call_id);
      const last = out[out.length - 1];
      if (last?.role === 'assistant') out[out.length - 1] = { ...last, toolCalls: [...(last.toolCalls ?? []), call] };
      else out.push({ role: 'assistant', content: '', toolCalls: [call] });
    } else if (type === 'function_call_output') {
      const o = check(outputItem, item, root, ['input', i]);
      if (!calls.has(o.call_id)) {
        throw invalid(
          `Invalid 'input[${i}].call_id': no function_call before it has the call_id ${JSON.stringify(o.call_id)}.`,
          `input[${i}].call_id`,
          'invalid_value',
        );
      }
      const content = typeof o.output === 'string' ? o.output : o.output.map((p) => p.text).join('');
      out.push({ role: 'tool', content, toolCallId: o.call_id });
    } else if (type === 'reasoning') {
      // Reasoning items are a model's own summaries, sent back by agents: this server never makes
      // them and the model takes none, so they are left out (documented).
    } else {
      throw invalid(
        `Invalid 'input[${i}].type': ${JSON.stringify(type)} is not an input item type this server supports (message, function_call, function_call_output, reasoning).`,
        `input[${i}].type`,
        'invalid_value',
      );
    }
  });
  return out;
}

/**
 * Validates a Responses request body. `previous(id)` gives a stored conversation (or throws the
 * 404 previous_response_not_found). Throws ApiError (400 naming the field).
 */
export function parseResponsesRequest(
  raw: unknown,
  hosted: HostedTools,
  previous: (id: string) => readonly CompletionMessage[],
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): ResponsesRequest {
  const body = objectAt(raw, null);
  const t = check(top, body, body, []);
  if (t.background === true)
    throw invalid("'background' responses are not supported.", 'background', 'unsupported_value');
  if (t.conversation !== undefined && t.conversation !== null) {
    throw invalid("'conversation' is not supported: use 'previous_response_id'.", 'conversation', 'unsupported_value');
  }
  if (t.prompt !== undefined && t.prompt !== null) {
    throw invalid("'prompt' templates are not supported.", 'prompt', 'unsupported_value');
  }
  const { tools, names } = parseTools(t, body, hosted, limits);
  const toolChoice = parseToolChoice(t, tools, names);
  const responseFormat = parseFormat(t, body, limits);
  if (responseFormat.type !== 'text' && toolChoice !== 'none') {
    throw invalid(
      "'text.format' other than text together with 'tools' is not supported, unless 'tool_choice' is \"none\"",
      'text.format',
      'unsupported_value',
    );
  }
  const before = t.previous_response_id ? previous(t.previous_response_id) : [];
  const conversation = parseInput(t, body, before);
  const instructions = t.instructions ?? null;
  return {
    model: t.model,
    messages: instructions ? [{ role: 'system', content: instructions }, ...conversation] : conversation,
    maxTokens: t.max_output_tokens ?? null,
    temperature: t.temperature ?? 1,
    topP: t.top_p ?? 1,
    seed: null,
    stop: [],
    frequencyPenalty: 0,
    presencePenalty: 0,
    stream: t.stream === true,
    includeUsage: true,
    n: 1,
    tools,
    toolChoice,
    parallelToolCalls: t.parallel_tool_calls !== false,
    responseFormat,
    conversation,
    instructions,
    previousResponseId: t.previous_response_id ?? null,
    store: t.store !== false,
    toolNames: names,
    echo: {
      tools: t.tools ?? [],
      tool_choice: t.tool_choice ?? 'auto',
      text: t.text ?? { format: { type: 'text' } },
      metadata: t.metadata ?? {},
      max_output_tokens: t.max_output_tokens ?? null,
    },
  };
}

/**
 * POST /v1/messages (Anthropic's Messages API) as the engine's one request: `system` (a string or
 * text blocks) and `messages` with `text`, `tool_use` and `tool_result` blocks become the
 * conversation, custom tools (`input_schema`) the model's functions, `tool_choice` auto / any /
 * tool / none, `max_tokens` required (and clamped by the engine to the room the context has left,
 * as llama-server does). Anthropic's server tools (`web_search_…`, `bash_…`, …) are left out as
 * hosted tools. Fields that mean nothing for a local model (`thinking`, `context_management`,
 * `output_config`, `metadata`, `cache_control`, …) are accepted and documented. Pure.
 */
import { z } from '@vigil/shared-types';
import { type ApiError, invalid } from '../errors.js';
import type { CompletionMessage, ToolCall, ToolSpec } from '../history.js';
import { checkSchemaShape, checkStop, DEFAULT_INPUT_LIMITS, type InputLimits } from '../limits.js';
import { type CompletionRequest, checkTool, checkToolList, type ToolChoice } from '../request.js';
import { check, type HostedTools, lenientSchema, objectAt } from './common.js';

/** A validated Messages request (the engine's request). */
export type MessagesRequest = CompletionRequest;

const number = (min: number, max: number) => z.number().min(min).max(max).nullish();

const top = z.object({
  model: z.string().min(1),
  messages: z.array(z.unknown()).min(1),
  max_tokens: z.number().int().min(1),
  system: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]).nullish(),
  stop_sequences: z.array(z.string()).nullish(),
  temperature: number(0, 1),
  top_p: number(0, 1),
  top_k: z.number().int().min(0).nullish(),
  stream: z.boolean().nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z
    .object({
      type: z.enum(['auto', 'any', 'tool', 'none']),
      name: z.string().nullish(),
      disable_parallel_tool_use: z.boolean().nullish(),
    })
    .nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  thinking: z.record(z.string(), z.unknown()).nullish(),
  context_management: z.record(z.string(), z.unknown()).nullish(),
  output_config: z.record(z.string(), z.unknown()).nullish(),
  service_tier: z.string().nullish(),
  container: z.unknown().optional(),
  mcp_servers: z.array(z.unknown()).nullish(),
});
const countTop = top.extend({ max_tokens: z.number().int().min(1).nullish() });
type Top = z.output<typeof countTop>;

const message = z.object({
  // `system` inside `messages`: Claude Code 2.1 sends it (instructions in the middle of a conversation).
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]),
});
const customTool = z.object({
  type: z.literal('custom').nullish(),
  name: z.string(),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()),
  strict: z.boolean().nullish(),
});
const textBlock = z.object({ type: z.literal('text'), text: z.string() });
const toolUse = z.object({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
});
const toolResult = z.object({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]).nullish(),
  is_error: z.boolean().nullish(),
});

/** Blocks the model cannot take: a 400 naming them, never dropped. */
const MEDIA_BLOCKS = new Set(['image', 'document', 'search_result', 'container_upload']);
/** Blocks of the model's own thinking, sent back by clients: this server makes none; left out. */
const THINKING_BLOCKS = new Set(['thinking', 'redacted_thinking']);

function blockError(param: string, type: unknown): ApiError {
  if (typeof type === 'string' && MEDIA_BLOCKS.has(type)) {
    return invalid(
      `${param}: ${type} blocks are not supported: the model on this server takes text only.`,
      `${param}.type`,
      'unsupported_value',
    );
  }
  return invalid(
    `${param}.type: ${JSON.stringify(type)} is not a content block type this server supports (text, tool_use, tool_result).`,
    `${param}.type`,
    'invalid_value',
  );
}

/** The text of text blocks (tool results, system); anything else is a 400 naming it. */
function blocksText(
  blocks: string | Record<string, unknown>[] | null | undefined,
  root: unknown,
  path: (string | number)[],
) {
  if (blocks === null || blocks === undefined) return '';
  if (typeof blocks === 'string') return blocks;
  return blocks
    .map((b, j) => {
      if (b.type !== 'text') throw blockError(pathName([...path, j]), b.type);
      return check(textBlock, b, root, [...path, j]).text;
    })
    .join('');
}

const pathName = (path: readonly (string | number)[]) =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

/** `messages` as the conversation: tool_use blocks become calls, tool_result blocks their results. */
function parseMessages(t: Top, root: unknown): CompletionMessage[] {
  const out: CompletionMessage[] = [];
  const calls = new Set<string>();
  t.messages.forEach((raw, i) => {
    const m = check(message, objectAt(raw, `messages[${i}]`), root, ['messages', i]);
    if (m.role === 'system') {
      out.push({ role: 'system', content: blocksText(m.content, root, ['messages', i, 'content']) });
      return;
    }
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      return;
    }
    let text = '';
    const toolCalls: ToolCall[] = [];
    const results: CompletionMessage[] = [];
    m.content.forEach((b, j) => {
      const path = ['messages', i, 'content', j];
      if (b.type === 'text') text += check(textBlock, b, root, path).text;
      else if (b.type === 'tool_use' && m.role === 'assistant') {
        const u = check(toolUse, b, root, path);
        calls.add(u.id);
        toolCalls.push({ id: u.id, name: u.name, arguments: JSON.stringify(u.input ?? {}) });
      } else if (b.type === 'tool_result' && m.role === 'user') {
        const r = check(toolResult, b, root, path);
        if (!calls.has(r.tool_use_id)) {
          throw invalid(
            `${pathName(path)}.tool_use_id: no tool_use block before it has the id ${JSON.stringify(r.tool_use_id)}.`,
            `${pathName(path)}.tool_use_id`,
            'invalid_value',
          );
        }
        const content = blocksText(r.content, root, [...path, 'content']);
        results.push({ role: 'tool', content: r.is_error ? `Error: ${content}` : content, toolCallId: r.tool_use_id });
      } else if (!(m.role === 'assistant' && typeof b.type === 'string' && THINKING_BLOCKS.has(b.type))) {
        throw blockError(pathName(path), b.type);
      }
    });
    if (m.role === 'assistant')
      out.push({ role: 'assistant', content: text, ...(toolCalls.length ? { toolCalls } : {}) });
    else {
      out.push(...results);
      if (text !== '' || results.length === 0) out.push({ role: 'user', content: text });
    }
  });
  return out;
}

/** Anthropic's server tools and client tools with a versioned `type`: left out as hosted tools. */
function parseTools(
  t: Top,
  root: unknown,
  hosted: HostedTools,
  limits: InputLimits,
): { tools: ToolSpec[]; toolChoice: ToolChoice } {
  const tools: ToolSpec[] = [];
  const names = new Set<string>();
  checkToolList(t.tools ?? [], limits, () => eachTool(t, root, hosted, limits, tools, names));
  const c = t.tool_choice;
  let toolChoice: ToolChoice = tools.length > 0 ? 'auto' : 'none';
  if (c && tools.length > 0) {
    if (c.type === 'any') toolChoice = 'required';
    else if (c.type === 'none') toolChoice = 'none';
    else if (c.type === 'tool') {
      if (!c.name || !names.has(c.name)) {
        throw invalid(
          `tool_choice.name: the tool ${JSON.stringify(c.name ?? null)} is not in 'tools'.`,
          'tool_choice.name',
        );
      }
      toolChoice = { name: c.name };
    }
  }
  return { tools, toolChoice };
}

/** Each custom tool checked into `tools` (its schema's shape within the limits before it is relaxed). */
function eachTool(
  t: Top,
  root: unknown,
  hosted: HostedTools,
  limits: InputLimits,
  tools: ToolSpec[],
  names: Set<string>,
): void {
  (t.tools ?? []).forEach((raw, i) => {
    const type = objectAt(raw, `tools[${i}]`).type;
    if (type === undefined || type === null || type === 'custom') {
      const c = check(customTool, raw, root, ['tools', i]);
      checkSchemaShape(c.input_schema, `tools[${i}].input_schema`, limits);
      tools.push(
        checkTool(
          {
            name: c.name,
            description: c.description,
            parameters: c.strict === true ? c.input_schema : lenientSchema(c.input_schema),
          },
          `tools[${i}]`,
          names,
          limits,
        ),
      );
    } else if (typeof type === 'string' && /_\d{8}$/.test(type)) {
      hosted.leaveOut(type, `tools[${i}].type`, '/v1/messages');
    } else {
      throw invalid(
        `tools[${i}].type: ${JSON.stringify(type)} is not a tool type this server supports (custom tools with input_schema).`,
        `tools[${i}].type`,
        'invalid_value',
      );
    }
  });
}

/** Validates a Messages body (`countOnly`: count_tokens, where `max_tokens` is not asked). Throws ApiError. */
export function parseMessagesRequest(
  raw: unknown,
  hosted: HostedTools,
  countOnly = false,
  limits: InputLimits = DEFAULT_INPUT_LIMITS,
): MessagesRequest {
  const body = objectAt(raw, null);
  const t: Top = countOnly ? check(countTop, body, body, []) : check(top, body, body, []);
  const { tools, toolChoice } = parseTools(t, body, hosted, limits);
  const stop = (t.stop_sequences ?? []).filter((s) => s !== '');
  checkStop(stop, limits, 'stop_sequences');
  const messages = parseMessages(t, body);
  const system = blocksText(t.system, body, ['system']);
  return {
    model: t.model,
    messages: system !== '' ? [{ role: 'system', content: system }, ...messages] : messages,
    maxTokens: t.max_tokens ?? null,
    temperature: t.temperature ?? 1,
    topP: t.top_p ?? 1,
    topK: t.top_k ?? null,
    seed: null,
    stop,
    frequencyPenalty: 0,
    presencePenalty: 0,
    stream: t.stream === true,
    includeUsage: true,
    n: 1,
    tools,
    toolChoice,
    parallelToolCalls: t.tool_choice?.disable_parallel_tool_use !== true,
    responseFormat: { type: 'text' },
  };
}

/** Anthropic's error `type` for an HTTP status. */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
      return 'overloaded_error';
    case 504:
      return 'timeout_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** An error in Anthropic's shape: `{"type":"error","error":{"type":…,"message":…}}`. */
export const anthropicErrorBody = (e: ApiError) => ({
  type: 'error',
  error: { type: anthropicErrorType(e.status), message: e.message },
});

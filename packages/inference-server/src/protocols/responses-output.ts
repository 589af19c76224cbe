/**
 * The Responses API's answer: a `response` object with `message` and `function_call` output
 * items, or, streamed, the documented events with `sequence_number`s (response.created,
 * response.in_progress, output_item.added, content_part.added, output_text.delta/.done,
 * function_call_arguments.delta/.done, content_part.done, output_item.done, then
 * response.completed or response.incomplete; an `error` event and response.failed for a failure
 * after the stream began). Stored responses (`store`, the default) are kept in a bounded
 * in-memory store for `previous_response_id`.
 */
import { randomBytes } from 'node:crypto';
import { ApiError, ContextLengthError, invalid } from '../errors.js';
import type { CompletionMessage } from '../history.js';
import type { InputLimits } from '../limits.js';
import { toApiError } from '../openai.js';
import type { GeneratedChoice, Generation, Output, Protocol } from '../pipeline.js';
import { sse } from '../pipeline.js';
import { CallPieces, type HostedTools } from './common.js';
import { parseResponsesRequest, type ResponsesRequest } from './responses.js';

const hex = (n: number) => randomBytes(n).toString('hex');

/** Stored conversations by response id, least recently stored first; count and bytes bounded. */
export class ResponseStore {
  private readonly items = new Map<string, { messages: readonly CompletionMessage[]; bytes: number }>();
  private bytes = 0;

  constructor(
    readonly maxCount = 256,
    readonly maxBytes = 32 * 1024 * 1024,
  ) {}

  get size(): number {
    return this.items.size;
  }

  put(id: string, messages: readonly CompletionMessage[]): void {
    const bytes = Buffer.byteLength(JSON.stringify(messages));
    if (bytes > this.maxBytes) return;
    this.items.set(id, { messages, bytes });
    this.bytes += bytes;
    for (const [old, v] of this.items) {
      if (this.items.size <= this.maxCount && this.bytes <= this.maxBytes) break;
      this.items.delete(old);
      this.bytes -= v.bytes;
    }
  }

  /** The conversation of `id` (its input and its output); 404 previous_response_not_found if unknown. */
  get(id: string): readonly CompletionMessage[] {
    const v = this.items.get(id);
    if (!v) {
      throw new ApiError(
        404,
        `Previous response with id '${id}' not found: this server keeps the last ${this.maxCount} stored responses (at most ${this.maxBytes / 1024 / 1024} MiB) in memory, until it restarts.`,
        'invalid_request_error',
        'previous_response_id',
        'previous_response_not_found',
      );
    }
    return v.messages;
  }
}

/** The Responses protocol of one server: its store and its hosted-tool log. */
export function responsesProtocol(
  hosted: HostedTools,
  store: ResponseStore,
  limits: InputLimits,
): Protocol<ResponsesRequest> {
  return {
    parse: (raw) => parseResponsesRequest(raw, hosted, (id) => store.get(id), limits),
    error: (err) =>
      err instanceof ContextLengthError ? invalid(err.message, 'input', 'context_length_exceeded') : toApiError(err),
    errorBody: (e) => e.toJSON(),
    output: (body, write) => responsesOutput(body, write, store),
  };
}

interface CallItem {
  readonly id: string;
  readonly callId: string;
  readonly name: string;
  arguments: string;
}

/** The assistant's turn as the stored conversation keeps it (previous_response_id). */
function assistantMessage(text: string, calls: readonly CallItem[]): CompletionMessage {
  return {
    role: 'assistant',
    content: text,
    ...(calls.length > 0
      ? { toolCalls: calls.map((k) => ({ id: k.callId, name: k.name, arguments: k.arguments })) }
      : {}),
  };
}

/** The message item of a response. */
const messageItem = (id: string, t: string, status: string) => ({
  id,
  type: 'message',
  status,
  role: 'assistant',
  content: [{ type: 'output_text', text: t, annotations: [], logprobs: [] }],
});

/** A function_call item, with the namespace its flat name stands for. */
function callItem(body: ResponsesRequest, c: CallItem, status: string) {
  const tool = body.toolNames.get(c.name) ?? { name: c.name, namespace: null };
  return {
    id: c.id,
    type: 'function_call',
    status,
    call_id: c.callId,
    name: tool.name,
    ...(tool.namespace !== null ? { namespace: tool.namespace } : {}),
    arguments: c.arguments,
  };
}

/** The response object: the request's settings echoed, the output, and the usage once generated. */
function responseObject(
  body: ResponsesRequest,
  id: string,
  createdAt: number,
  status: string,
  g: Generation | null,
  output: unknown[],
  error: unknown,
) {
  const outText = output
    .filter((o) => (o as { type: string }).type === 'message')
    .map((o) => (o as { content: { text: string }[] }).content.map((p) => p.text).join(''))
    .join('');
  return {
    id,
    object: 'response',
    created_at: createdAt,
    status,
    error,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions,
    max_output_tokens: body.echo.max_output_tokens,
    model: body.model,
    output,
    output_text: outText,
    parallel_tool_calls: body.parallelToolCalls,
    previous_response_id: body.previousResponseId,
    store: body.store,
    temperature: body.temperature,
    top_p: body.topP,
    text: body.echo.text,
    tool_choice: body.echo.tool_choice,
    tools: body.echo.tools,
    truncation: 'disabled',
    metadata: body.echo.metadata,
    usage: g
      ? {
          input_tokens: g.promptTokens,
          input_tokens_details: { cached_tokens: g.cachedTokens },
          output_tokens: g.completionTokens,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: g.promptTokens + g.completionTokens,
        }
      : null,
  };
}

function responsesOutput(body: ResponsesRequest, write: (text: string) => void, store: ResponseStore): Output {
  const id = `resp_${hex(24)}`;
  const createdAt = Math.floor(Date.now() / 1000);
  let seq = 0;
  const send = (type: string, data: Record<string, unknown>) =>
    write(sse(type, { type, sequence_number: seq++, ...data }));
  const messageId = `msg_${hex(24)}`;
  let text: string | null = null; // null: no message item opened (streamed)
  const calls: CallItem[] = [];
  const pieces = new CallPieces();
  let open: 'text' | number | null = null;
  const messageItemOf = (t: string, status: string) => messageItem(messageId, t, status);
  const callItemOf = (c: CallItem, status: string) => callItem(body, c, status);
  const response = (status: string, g: Generation | null, output: unknown[], error: unknown = null) =>
    responseObject(body, id, createdAt, status, g, output, error);
  const textDelta = (delta: string) =>
    send('response.output_text.delta', { item_id: messageId, output_index: 0, content_index: 0, delta, logprobs: [] });

  /** Streamed: closes the open item (the message's text, or a call's arguments). */
  const closeOpen = () => {
    if (open === 'text' && text !== null) {
      const at = { item_id: messageId, output_index: 0, content_index: 0 };
      send('response.output_text.done', { ...at, text, logprobs: [] });
      send('response.content_part.done', { ...at, part: messageItemOf(text, 'completed').content[0] });
      send('response.output_item.done', { output_index: 0, item: messageItemOf(text, 'completed') });
    } else if (typeof open === 'number') {
      const c = calls[open]!;
      const index = open + (text !== null ? 1 : 0);
      send('response.function_call_arguments.done', { item_id: c.id, output_index: index, arguments: c.arguments });
      send('response.output_item.done', { output_index: index, item: callItemOf(c, 'completed') });
    }
    open = null;
  };
  const openText = () => {
    text = '';
    open = 'text';
    send('response.output_item.added', { output_index: 0, item: { ...messageItemOf('', 'in_progress'), content: [] } });
    send('response.content_part.added', {
      item_id: messageId,
      output_index: 0,
      content_index: 0,
      part: messageItemOf('', 'in_progress').content[0],
    });
  };
  const newCall = (name: string): CallItem => ({ id: `fc_${hex(24)}`, callId: `call_${hex(12)}`, name, arguments: '' });

  /** The final items; streamed, what was not streamed is sent now (so that the events match). */
  const settle = (c: GeneratedChoice): unknown[] => {
    if (body.stream) {
      if (c.text !== '' && text === null && calls.length === 0) openText();
      if (text !== null && c.text.startsWith(text) && c.text !== text) {
        textDelta(c.text.slice(text.length));
      }
      if (text !== null) text = c.text;
      c.calls.forEach((call, k) => {
        if (calls[k]) calls[k].arguments = call.arguments;
      });
      closeOpen();
    }
    const output: unknown[] = [];
    if (text !== null || c.text !== '' || c.calls.length === 0) output.push(messageItemOf(c.text, 'completed'));
    c.calls.forEach((call, k) => {
      const item = calls[k] ?? newCall(call.name);
      item.arguments = call.arguments;
      calls[k] = item;
      output.push(callItemOf(item, 'completed'));
    });
    return output;
  };

  return {
    begin: () => {
      send('response.created', { response: response('in_progress', null, []) });
      send('response.in_progress', { response: response('in_progress', null, []) });
    },
    text: (_i, t) => {
      if (calls.length > 0) return; // after a call, the model's text ends (node-llama-cpp ends it)
      if (text === null) openText();
      text += t;
      textDelta(t);
    },
    callText: (_i, callIndex, name, t) => {
      const piece = pieces.add(callIndex, t);
      // The message item (when there is one) comes first.
      const index = () => callIndex + (text !== null ? 1 : 0);
      if (piece.first) {
        closeOpen();
        const c = newCall(name);
        calls[callIndex] = c;
        open = callIndex;
        send('response.output_item.added', { output_index: index(), item: callItemOf(c, 'in_progress') });
      }
      if (piece.text !== '') {
        const c = calls[callIndex]!;
        c.arguments += piece.text;
        send('response.function_call_arguments.delta', { item_id: c.id, output_index: index(), delta: piece.text });
      }
    },
    endChoice: () => {},
    finish: (g) => {
      const c = g.choices[0]!;
      const output = settle(c);
      const status = c.finishReason === 'length' ? 'incomplete' : 'completed';
      const answer = response(status, g, output);
      if (body.store) store.put(id, [...body.conversation, assistantMessage(c.text, calls)]);
      if (!body.stream) return answer;
      send(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: answer });
      return undefined;
    },
    fail: (e) => {
      send('error', { code: e.wireCode, message: e.message, param: e.param });
      send('response.failed', {
        response: response('failed', null, [], { code: e.wireCode, message: e.message }),
      });
    },
  };
}

/**
 * The Messages API's answer: a `message` with `text` and `tool_use` content blocks, `stop_reason`
 * (end_turn, max_tokens, stop_sequence, tool_use) and `usage`; streamed, the documented events
 * (message_start, ping, content_block_start / _delta (text_delta, input_json_delta) / _stop,
 * message_delta, message_stop; an `error` event for a failure after the stream began). Errors in
 * Anthropic's shape; a prompt longer than the context is the "prompt is too long" 400 that
 * Anthropic's clients compact on.
 */
import { randomBytes } from 'node:crypto';
import { ApiError, ContextLengthError } from '../errors.js';
import type { InputLimits } from '../limits.js';
import { toApiError } from '../openai.js';
import type { GeneratedChoice, Output, Protocol } from '../pipeline.js';
import { sse } from '../pipeline.js';
import { anthropicErrorBody, type MessagesRequest, parseMessagesRequest } from './anthropic.js';
import { CallPieces, type HostedTools } from './common.js';

const hex = (n: number) => randomBytes(n).toString('hex');

/** Any failure as an ApiError; context overflow as Anthropic words it. */
export function anthropicError(err: unknown): ApiError {
  if (err instanceof ContextLengthError) {
    return new ApiError(
      400,
      `prompt is too long: ${err.promptTokens} tokens > ${err.contextSize - 1} maximum`,
      'invalid_request_error',
      'messages',
      'context_length_exceeded',
    );
  }
  return toApiError(err);
}

export function anthropicProtocol(hosted: HostedTools, limits: InputLimits): Protocol<MessagesRequest> {
  return {
    parse: (raw) => parseMessagesRequest(raw, hosted, false, limits),
    error: anthropicError,
    errorBody: anthropicErrorBody,
    output: (body, write) => messagesOutput(body, write),
  };
}

/** Why the message ended, in Anthropic's words. */
function stopReason(c: GeneratedChoice): string {
  if (c.finishReason === 'tool_calls') return 'tool_use';
  if (c.finishReason === 'length') return 'max_tokens';
  return c.stopSequence !== null ? 'stop_sequence' : 'end_turn';
}

/** A call's arguments as the `input` object (the engine's arguments are JSON of an object). */
function inputOf(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

function messagesOutput(body: MessagesRequest, write: (text: string) => void): Output {
  const id = `msg_${hex(12)}`;
  const send = (type: string, data: Record<string, unknown>) => write(sse(type, { type, ...data }));
  let index = -1; // the open content block; -1 before the first
  let openKind: 'text' | 'tool' | null = null;
  const toolIds: string[] = [];
  const pieces = new CallPieces();
  let textSent = '';
  const close = () => {
    if (openKind !== null) send('content_block_stop', { index });
    openKind = null;
  };
  // Anthropic counts the prompt tokens read from a cache apart from `input_tokens` (their sum is the prompt).
  const usage = (input: number, output: number, cached = 0) => ({
    input_tokens: input - cached,
    output_tokens: output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  });
  const toolId = (k: number) => {
    toolIds[k] ??= `toolu_${hex(12)}`;
    return toolIds[k];
  };
  const openText = () => {
    close();
    index++;
    openKind = 'text';
    send('content_block_start', { index, content_block: { type: 'text', text: '' } });
  };
  return {
    begin: () => {
      send('message_start', {
        message: {
          id,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: usage(0, 0),
        },
      });
      send('ping', {});
    },
    text: (_i, t) => {
      if (openKind === 'tool') return; // after a call, the model's text ends
      if (openKind !== 'text') openText();
      textSent += t;
      send('content_block_delta', { index, delta: { type: 'text_delta', text: t } });
    },
    callText: (_i, callIndex, name, t) => {
      const piece = pieces.add(callIndex, t);
      if (piece.first) {
        close();
        index++;
        openKind = 'tool';
        send('content_block_start', {
          index,
          content_block: { type: 'tool_use', id: toolId(callIndex), name, input: {} },
        });
      }
      if (piece.text !== '') {
        send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece.text } });
      }
    },
    endChoice: () => {},
    finish: (g) => {
      const c = g.choices[0]!;
      const content: unknown[] = [];
      if (c.text !== '' || c.calls.length === 0) content.push({ type: 'text', text: c.text });
      c.calls.forEach((call, k) => {
        content.push({ type: 'tool_use', id: toolId(k), name: call.name, input: inputOf(call.arguments) });
      });
      if (!body.stream) {
        return {
          id,
          type: 'message',
          role: 'assistant',
          model: body.model,
          content,
          stop_reason: stopReason(c),
          stop_sequence: c.stopSequence,
          usage: usage(g.promptTokens, g.completionTokens, g.cachedTokens),
        };
      }
      // What the stream has not carried (text trimmed at a stop string is never longer).
      if (c.calls.length === 0 && openKind === null && index === -1) openText();
      if (openKind === 'text' && c.text.startsWith(textSent) && c.text !== textSent) {
        send('content_block_delta', { index, delta: { type: 'text_delta', text: c.text.slice(textSent.length) } });
      }
      close();
      send('message_delta', {
        delta: { stop_reason: stopReason(c), stop_sequence: c.stopSequence },
        usage: usage(g.promptTokens, g.completionTokens, g.cachedTokens),
      });
      send('message_stop', {});
      return undefined;
    },
    fail: (e) => send('error', anthropicErrorBody(e)),
  };
}

/**
 * POST /v1/chat/completions: OpenAI's chat completion protocol on the one request pipeline
 * (pipeline.ts). Its request is the engine's request as it is; its answer is a
 * `chat.completion`, or `chat.completion.chunk` events ending with `data: [DONE]`.
 */
import type { ApiError } from './errors.js';
import {
  type Choice,
  type CompletionRequest,
  chunk,
  completionBody,
  completionId,
  parseCompletionRequest,
  toApiError,
  toolCallId,
  usage,
  usageChunk,
} from './openai.js';
import { type GeneratedChoice, type Output, type Protocol, sse } from './pipeline.js';
import { CallPieces } from './protocols/common.js';
import type { RequestLimits } from './request.js';

/** The chat completion protocol within `limits` (--max-n, the input limits). */
export function chatProtocol(limits: RequestLimits): Protocol {
  return {
    parse: (raw) => parseCompletionRequest(raw, limits),
    error: toApiError,
    errorBody: (e: ApiError) => e.toJSON(),
    output: (body, write) => chatOutput(body, write),
  };
}

function chatOutput(body: CompletionRequest, write: (text: string) => void): Output {
  const id = completionId();
  const created = Math.floor(Date.now() / 1000);
  const send = (data: unknown) => write(sse(null, data));
  const calls: StreamedCalls[] = [];
  const callsOf = (i: number) => {
    calls[i] ??= new StreamedCalls(id, created, body.model, i, send);
    return calls[i];
  };
  const toChoice = (c: GeneratedChoice, i: number): Choice => ({
    text: c.text,
    finishReason: c.finishReason,
    toolCalls: c.calls.map((call, k) => ({
      id: calls[i]?.ids[k] ?? toolCallId(),
      type: 'function' as const,
      function: { name: call.name, arguments: call.arguments },
    })),
  });
  return {
    begin: () => {
      for (let i = 0; i < body.n; i++)
        send(chunk(id, created, body.model, { role: 'assistant', content: '' }, null, i));
    },
    text: (i, text) => send(chunk(id, created, body.model, { content: text }, null, i)),
    callText: (i, callIndex, name, text) => callsOf(i).add(callIndex, name, text),
    endChoice: (i, c) => send(chunk(id, created, body.model, {}, c.finishReason, i)),
    finish: (g) => {
      const u = usage(g.promptTokens, g.completionTokens, g.cachedTokens);
      if (!body.stream) return completionBody(id, created, body.model, g.choices.map(toChoice), u);
      if (body.includeUsage) send(usageChunk(id, created, body.model, u));
      send('[DONE]');
      return undefined;
    },
    fail: (e) => {
      send(e.toJSON());
      send('[DONE]');
    },
  };
}

/** A choice's function calls as stream deltas: the first piece of a call carries its id, type and name. */
class StreamedCalls {
  readonly ids: string[] = [];
  private readonly pieces = new CallPieces();

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
    const piece = this.pieces.add(callIndex, text);
    if (piece.first) {
      this.ids[callIndex] = toolCallId();
      delta({ id: this.ids[callIndex], type: 'function', function: { name, arguments: '' } });
    }
    if (piece.text !== '') delta({ function: { arguments: piece.text } });
  }
}

/** The inference server's OpenAI-style request and response shapes (spec 2.4, DESIGN.md 4). */

import { GUARDIAN_DEFAULTS } from './guardian.js';

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  readonly role: ChatRole;
  readonly content: string;
}

export interface ChatCompletionRequest {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  readonly max_tokens?: number;
  readonly max_completion_tokens?: number;
  readonly temperature?: number;
  readonly top_p?: number;
  readonly seed?: number;
  readonly stop?: string | readonly string[];
  readonly stream?: boolean;
  readonly stream_options?: { readonly include_usage?: boolean };
}

export interface ChatUsage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
  /** Prompt tokens the server did not evaluate again (a cached prefix), as OpenAI reports them. */
  readonly prompt_tokens_details?: { readonly cached_tokens: number };
}

export type FinishReason = 'stop' | 'length' | 'tool_calls';

/** A function call the model made (OpenAI's `tool_calls` item). */
export interface ToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface ChatCompletion {
  readonly id: string;
  readonly object: 'chat.completion';
  readonly created: number;
  readonly model: string;
  readonly choices: readonly {
    readonly index: number;
    readonly message: {
      readonly role: 'assistant';
      /** null when the model answered with tool calls only. */
      readonly content: string | null;
      readonly tool_calls?: readonly ToolCall[];
    };
    readonly finish_reason: FinishReason;
  }[];
  readonly usage: ChatUsage;
}

export interface ModelList {
  readonly object: 'list';
  readonly data: readonly {
    readonly id: string;
    readonly object: 'model';
    readonly created: number;
    readonly owned_by: string;
  }[];
}

/** An error in OpenAI's shape. */
export interface OpenAIError {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** The guardian's liveness probe: a real, tiny, deterministic completion. */
export function probeRequest(model: string, content = 'ping'): ChatCompletionRequest {
  return {
    model,
    messages: [{ role: 'user', content }],
    max_tokens: GUARDIAN_DEFAULTS.probeMaxTokens,
    temperature: GUARDIAN_DEFAULTS.probeTemperature,
  };
}

/** The probe succeeds when the reply text contains "content" as a quoted JSON key (spec 2.4). */
export function isProbeSuccess(replyText: string): boolean {
  return replyText.includes('"content"');
}

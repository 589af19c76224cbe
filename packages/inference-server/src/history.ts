/**
 * OpenAI messages as node-llama-cpp's chat history: an assistant message's `tool_calls` become
 * function calls in the model's response, each with the result its `tool` message gave, so the
 * model's chat wrapper renders calls and results in the syntax it was trained on. Tools become
 * node-llama-cpp's function definitions. Pure.
 */
import type { ChatHistoryItem, ChatModelFunctions, ChatModelResponse } from 'node-llama-cpp';

/** A function the model may call (`tools[].function`), its parameters checked for the grammar. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string | null;
  readonly parameters: Record<string, unknown> | null;
}

export interface ToolCall {
  readonly id: string;
  readonly name: string;
  /** The arguments as the JSON text OpenAI sends. */
  readonly arguments: string;
}

export type CompletionMessage =
  | { readonly role: 'system' | 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string; readonly toolCalls?: readonly ToolCall[] }
  | { readonly role: 'tool'; readonly content: string; readonly toolCallId: string };

/** JSON when it parses, else the text as it is. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The chat history node-llama-cpp takes: the last item is the model's (possibly partial) answer. */
export function chatHistory(messages: readonly CompletionMessage[]): ChatHistoryItem[] {
  const results = new Map<string, string>();
  for (const m of messages) if (m.role === 'tool') results.set(m.toolCallId, m.content);
  const items: ChatHistoryItem[] = [];
  messages.forEach((m, i) => {
    if (m.role === 'system') items.push({ type: 'system', text: m.content });
    else if (m.role === 'user') items.push({ type: 'user', text: m.content });
    else if (m.role === 'assistant') {
      const response: ChatModelResponse['response'] = [];
      const calls = m.toolCalls ?? [];
      // An assistant message last is a prefix the model continues.
      if (m.content !== '' || (calls.length === 0 && i !== messages.length - 1)) response.push(m.content);
      for (const c of calls) {
        response.push({
          type: 'functionCall',
          name: c.name,
          params: jsonOrText(c.arguments),
          result: results.has(c.id) ? jsonOrText(results.get(c.id)!) : null,
        });
      }
      items.push({ type: 'model', response });
    }
    // Tool messages are in their call's item above.
  });
  // After the results of its calls the model goes on with the same response (node-llama-cpp's
  // function-calling flow); after a user or system message it starts a new one.
  const last = messages[messages.length - 1];
  if (last?.role !== 'assistant' && last?.role !== 'tool') items.push({ type: 'model', response: [] });
  return items;
}

/** The request's tools as node-llama-cpp's function definitions (documented in the prompt). */
export function chatFunctions(tools: readonly ToolSpec[]): ChatModelFunctions {
  const functions: Record<string, { description?: string; params?: unknown }> = {};
  for (const t of tools) {
    functions[t.name] = {
      ...(t.description ? { description: t.description } : {}),
      ...(t.parameters ? { params: t.parameters } : {}),
    };
  }
  return functions as ChatModelFunctions;
}

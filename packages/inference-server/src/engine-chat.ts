/**
 * Chat completion: one LlamaChat per completion on a sequence the scheduler handed out, with the
 * model's chat wrapper, or one that starts in function-calling mode when a call is required.
 */
import type {
  ChatModelFunctions,
  ChatWrapper,
  ChatWrapperGenerateContextStateOptions,
  LlamaChatResponse,
  LlamaContextSequence,
} from 'node-llama-cpp';
import type { CompletionInput, CompletionOutput } from './engine-types.js';
import { chatHistory } from './history.js';
import { completionTokensOf, generation, stopSequenceOf } from './sampling.js';

type NodeLlamaCpp = typeof import('node-llama-cpp');

/**
 * A chat completion of the input's messages on `sequence` (LlamaChat, with the model's chat
 * wrapper), the prompt's reuse settled by the engine. `input.onTokens` hears the count after each step.
 */
export async function completeChat(
  lib: NodeLlamaCpp,
  chatWrapper: ChatWrapper,
  sequence: LlamaContextSequence,
  maxTokens: number,
  input: CompletionInput,
): Promise<Omit<CompletionOutput, 'promptTokens' | 'cachedTokens' | 'restoredTokens'>> {
  const calling = input.functionCalling;
  const history = chatHistory(input.messages);
  const chat = new lib.LlamaChat({
    contextSequence: sequence,
    chatWrapper: calling?.force ? forcedCallWrapper(chatWrapper) : chatWrapper,
  });
  const run = generation(input, maxTokens);
  try {
    const response: LlamaChatResponse<ChatModelFunctions> = await chat.generateResponse(history, {
      ...run.options,
      ...(calling
        ? {
            functions: calling.functions,
            documentFunctionParams: true,
            maxParallelFunctionCalls: calling.maxCalls,
            ...(input.onCallText
              ? {
                  onFunctionCallParamsChunk: (c: { callIndex: number; functionName: string; paramsChunk: string }) =>
                    input.onCallText?.(c.callIndex, c.functionName, c.paramsChunk),
                }
              : {}),
          }
        : input.grammar
          ? { grammar: input.grammar }
          : {}),
    });
    const reason = response.metadata.stopReason;
    const calls = (response.functionCalls ?? []).map((c) => ({
      name: c.functionName,
      arguments: JSON.stringify(c.params ?? {}),
    }));
    return {
      text: response.response,
      finishReason: calls.length > 0 ? 'tool_calls' : reason === 'maxTokens' ? 'length' : 'stop',
      calls,
      completionTokens: completionTokensOf(response.metadata, run.generated(), maxTokens),
      stopSequence: stopSequenceOf(response.metadata),
    };
  } finally {
    chat.dispose({ disposeSequence: false });
  }
}

/**
 * The model's chat wrapper, but generation starts in function-calling mode (node-llama-cpp's
 * "initially engaged" function calls, as Functionary's wrapper uses): the function's name and
 * its arguments are sampled under node-llama-cpp's grammars, so they are valid whatever the
 * model. For `tool_choice` "required" or a named function.
 */
export function forcedCallWrapper(base: ChatWrapper): ChatWrapper {
  const forced = Object.create(base) as ChatWrapper;
  forced.generateContextState = (options: ChatWrapperGenerateContextStateOptions) => {
    const state = base.generateContextState(options);
    return {
      contextText: state.contextText,
      stopGenerationTriggers: state.stopGenerationTriggers,
      ...(state.ignoreStartText ? { ignoreStartText: state.ignoreStartText } : {}),
      functionCall: { initiallyEngaged: true, disengageInitiallyEngaged: [] },
    };
  };
  return forced;
}

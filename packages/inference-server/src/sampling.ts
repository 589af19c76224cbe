/**
 * What a chat completion (LlamaChat, or the plain token loop) and a raw text completion
 * (LlamaCompletion) share: the sampling options taken from the engine's one input, the count of
 * generated tokens, and how a finished generation's metadata reads back (its token count, the
 * stop string that ended it).
 */
import type { CompletionInput } from './engine-types.js';

/**
 * The sampler settings of a request, as every way of generating takes them: temperature, top_p,
 * top_k and seed where given, and the frequency and presence penalties (each clamped to 0–1) or
 * null when the request does not penalise.
 */
export function samplerSettings(input: CompletionInput) {
  const penalize = input.frequencyPenalty > 0 || input.presencePenalty > 0;
  return {
    sampler: {
      temperature: input.temperature,
      topP: input.topP,
      ...(input.topK ? { topK: input.topK } : {}),
      ...(input.seed !== null ? { seed: input.seed } : {}),
    },
    penalties: penalize
      ? {
          penalty: 1,
          frequencyPenalty: Math.min(1, Math.max(0, input.frequencyPenalty)),
          presencePenalty: Math.min(1, Math.max(0, input.presencePenalty)),
        }
      : null,
  };
}

/** The generation options both node-llama-cpp generators take, and the tokens generated so far. */
export function generation(input: CompletionInput, maxTokens: number) {
  let generated = 0;
  const { sampler, penalties } = samplerSettings(input);
  const options = {
    maxTokens,
    ...sampler,
    ...(input.stop.length > 0 ? { customStopTriggers: input.stop } : {}),
    repeatPenalty: penalties ?? (false as const),
    signal: input.signal,
    onToken: (tokens: readonly unknown[]) => {
      generated += tokens.length;
      input.onTokens?.(generated);
    },
    ...(input.onText ? { onTextChunk: input.onText } : {}),
  };
  return { options, generated: () => generated };
}

interface Finished {
  readonly stopReason: string;
  readonly customStopTrigger?: readonly unknown[];
}

/** Tokens generated: a generation ended by maxTokens counts maxTokens, whatever was heard. */
export function completionTokensOf(metadata: Finished, generated: number, maxTokens: number): number {
  return metadata.stopReason === 'maxTokens' ? Math.max(generated, maxTokens) : generated;
}

/** The stop string (of `stop`) that ended the generation; null when something else ended it. */
export function stopSequenceOf(metadata: Finished): string | null {
  return metadata.stopReason === 'customStopTrigger'
    ? (metadata.customStopTrigger ?? []).filter((p) => typeof p === 'string').join('')
    : null;
}

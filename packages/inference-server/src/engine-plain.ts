/**
 * Plain chat generation: a chat completion with no tools and no grammar, generated straight from
 * the sequence's token loop (node-llama-cpp's `evaluate`) on the prompt tokens the engine already
 * rendered, instead of through LlamaChat. LlamaChat's per-token work (its segment, function-call
 * and stop-trigger machinery) runs on the event loop between two steps, while the model waits;
 * what a plain answer needs of it is done here: the prompt's reuse of what the sequence holds, the sampling
 * settings, the end-of-generation tokens and the chat template's stop texts, the request's stop
 * strings, text that is streamed only once it is whole (a character split over tokens, the start of
 * a stop string). The tokens generated are the same as LlamaChat's: the same evaluation of the same
 * prompt, the same sampler settings.
 *
 * `plainStops` decides, once per model, whether its chat template allows this: a template whose
 * answers open segments (thoughts) or whose generation starts with prefix triggers goes through
 * LlamaChat, as does a stop trigger that is neither an end-of-generation token nor plain text.
 */
import type { ChatWrapper, LlamaContextSequence, LlamaModel, LlamaText, Token } from 'node-llama-cpp';
import { type Stepping, sampledTokens } from './engine-step.js';
import type { CompletionInput, CompletionOutput } from './engine-types.js';
import { completionTokensOf, samplerSettings } from './sampling.js';

/** Generated tokens the frequency and presence penalties look at (LlamaChat's default). */
const PENALTY_TOKENS = 64;
const REPLACEMENT = '\uFFFD';

/** The template's stop texts when plain generation is possible for it; null when it is not. */
export function plainStops(chatWrapper: ChatWrapper, model: LlamaModel): string[] | null {
  const segments = chatWrapper.settings.segments;
  if (segments && (segments.thought || segments.comment || segments.closeAllSegments)) return null;
  const state = chatWrapper.generateContextState({
    chatHistory: [
      { type: 'user', text: 'hi' },
      { type: 'model', response: [] },
    ],
  });
  if ('prefixTriggers' in state && (state.prefixTriggers || state.noPrefixTrigger || state.rerender)) return null;
  if (state.ignoreStartText?.length || state.functionCall) return null;
  const texts: string[] = [];
  for (const trigger of state.stopGenerationTriggers) {
    const text = plainText(trigger);
    if (text !== null) {
      if (text !== '') texts.push(text);
      continue;
    }
    const tokens = trigger.tokenize(model.tokenizer);
    if (tokens.length !== 1 || !model.isEogToken(tokens[0] as Token)) return null;
  }
  return texts;
}

/** The text of a LlamaText made of plain strings only; null when it holds special tokens. */
function plainText(text: LlamaText): string | null {
  let out = '';
  for (const v of text.values) {
    if (typeof v !== 'string') return null;
    out += v;
  }
  return out;
}

/**
 * Where a stop string starts in `text` at or after `from`: the earliest match of any, with the
 * stop string that matched; null when none.
 */
export function findStop(text: string, stops: readonly string[], from: number): { at: number; stop: string } | null {
  let best: { at: number; stop: string } | null = null;
  for (const stop of stops) {
    const at = text.indexOf(stop, Math.max(0, from - stop.length + 1));
    if (at >= 0 && (best === null || at < best.at)) best = { at, stop };
  }
  return best;
}

/**
 * How many characters at the end of `text` could be the start of a stop string: they are held
 * back from the stream until the next token tells.
 */
export function heldBack(text: string, stops: readonly string[]): number {
  let held = 0;
  for (const stop of stops) {
    for (let n = Math.min(stop.length - 1, text.length); n > held; n--) {
      if (text.endsWith(stop.slice(0, n))) {
        held = n;
        break;
      }
    }
  }
  return held;
}

type PlainOutput = Omit<CompletionOutput, 'promptTokens' | 'cachedTokens' | 'restoredTokens'>;

/**
 * Generates the answer to the prompt `tokens` on `sequence` (held exclusively by the caller):
 * evaluates what the sequence does not hold yet, then samples until an end-of-generation token, a
 * stop text or `maxTokens`. `templateStops` end the answer silently; the request's `stop` strings
 * are reported as the stop sequence. An aborted signal throws its reason. `stepping`: when steps
 * may skip node-llama-cpp's batch queue (engine-step.ts); null: every step through `evaluate`.
 */
export async function completePlain(
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  maxTokens: number,
  templateStops: readonly string[],
  input: CompletionInput,
  stepping: Stepping | null = null,
): Promise<PlainOutput> {
  const model = sequence.model;
  const signal = input.signal;
  // As LlamaChat: keep what the sequence holds of the prompt, at least the last token is evaluated.
  await sequence.adaptStateToTokens(tokens.slice(0, -1) as Token[], false);
  signal.throwIfAborted();
  const toEvaluate = tokens.slice(sequence.nextTokenIndex) as Token[];
  const stops = [...templateStops, ...input.stop];
  const generated: Token[] = [];
  const pending: Token[] = [];
  let text = '';
  let emitted = 0;
  const nl = model.tokens.nl;
  const { sampler, penalties } = samplerSettings(input);
  const emit = (upTo: number) => {
    if (upTo > emitted) input.onText?.(text.slice(emitted, upTo));
    emitted = Math.max(emitted, upTo);
  };
  const finish = (finishReason: 'stop' | 'length', stopSequence: string | null): PlainOutput => ({
    text: text.slice(0, emitted),
    finishReason,
    calls: [],
    completionTokens: completionTokensOf(
      { stopReason: finishReason === 'length' ? 'maxTokens' : 'eogToken' },
      generated.length,
      maxTokens,
    ),
    stopSequence,
  });
  const iterator = sampledTokens(
    sequence,
    toEvaluate,
    {
      ...sampler,
      ...(penalties
        ? {
            repeatPenalty: {
              ...penalties,
              punishTokens: () => generated.slice(-PENALTY_TOKENS).filter((t) => t !== nl),
              maxPunishTokens: PENALTY_TOKENS,
            },
          }
        : {}),
    },
    stepping,
    maxTokens,
  );
  let sampled = 0;
  // The tokens held back (a character split over tokens) join the text.
  const release = (chunk: string) => {
    text += chunk;
    generated.push(...pending);
    pending.length = 0;
  };
  for await (const token of iterator) {
    signal.throwIfAborted();
    if (model.isEogToken(token)) break;
    sampled++;
    pending.push(token);
    const chunk = model.detokenize(pending, false, generated);
    const whole = !chunk.endsWith(REPLACEMENT) || model.isSpecialToken(token);
    if (whole || pending.length >= 4 || sampled >= maxTokens) {
      const before = text.length;
      release(chunk);
      input.onTokens?.(generated.length);
      const hit = findStop(text, stops, before);
      if (hit) {
        emit(hit.at);
        const reported = input.stop.includes(hit.stop) && !templateStops.includes(hit.stop);
        return finish('stop', reported ? hit.stop : null);
      }
      emit(text.length - heldBack(text, stops));
    }
    if (sampled >= maxTokens) {
      emit(text.length);
      return finish('length', null);
    }
  }
  if (pending.length > 0) release(model.detokenize(pending, false, generated));
  emit(text.length);
  return finish('stop', null);
}

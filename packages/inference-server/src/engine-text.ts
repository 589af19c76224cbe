/**
 * What the engine does besides chat: raw text completion (legacy /v1/completions: the prompt as
 * it is, no chat template) on a sequence the scheduler handed out, and embeddings (/v1/embeddings)
 * from one embedding context on the loaded model: the weights are shared, the context is its own
 * (created on the first request, `contextSize` tokens), and requests take turns on it.
 */
import type { LlamaContextSequence, LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp';
import type { CompletionInput, CompletionOutput } from './engine-types.js';
import { ContextLengthError } from './errors.js';
import { completionTokensOf, generation, stopSequenceOf } from './sampling.js';

type NodeLlamaCpp = typeof import('node-llama-cpp');

/**
 * The beginning-of-text token LlamaCompletion puts before a raw prompt (as node-llama-cpp's
 * resolveBeginningTokenToPrepend decides it for the vocabulary); null when none.
 */
function beginningToken(model: LlamaModel): Token | null {
  const type = String(model.vocabularyType);
  if (type === 'rwkv' || type === 'ugm') return null;
  return type === 'wpm' || model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
}

/**
 * A raw prompt's tokens as LlamaCompletion evaluates them (its beginning token first): what the
 * slot choice compares with what a sequence holds, and what the usage counts.
 */
export function textPromptTokens(model: LlamaModel, prompt: string): Token[] {
  const tokens = model.tokenize(prompt, true);
  const bos = beginningToken(model);
  return bos === null ? tokens : [bos, ...tokens];
}

/**
 * Continues the raw prompt `tokens` (textPromptTokens) on `sequence` with the input's sampling
 * settings. LlamaCompletion keeps what the sequence holds of the same prefix and evaluates the rest.
 */
export async function completeText(
  lib: NodeLlamaCpp,
  sequence: LlamaContextSequence,
  tokens: readonly Token[],
  maxTokens: number,
  input: CompletionInput,
): Promise<Omit<CompletionOutput, 'promptTokens' | 'cachedTokens' | 'restoredTokens'>> {
  // LlamaCompletion puts the beginning token before its input itself.
  const bos = beginningToken(sequence.model);
  const body = bos !== null && tokens[0] === bos ? tokens.slice(1) : [...tokens];
  const completion = new lib.LlamaCompletion({ contextSequence: sequence });
  const run = generation(input, maxTokens);
  try {
    const r = await completion.generateCompletionWithMeta(body, {
      ...run.options,
      ...(input.grammar ? { grammar: input.grammar } : {}),
    });
    const reason = r.metadata.stopReason;
    return {
      text: r.response,
      finishReason: reason === 'maxTokens' ? 'length' : 'stop',
      calls: [],
      completionTokens: completionTokensOf(r.metadata, run.generated(), maxTokens),
      stopSequence: stopSequenceOf(r.metadata),
    };
  } finally {
    completion.dispose({ disposeSequence: false });
  }
}

/** Embeddings of the loaded model: one embedding context, made on first use, one request at a time. */
export class Embeddings {
  private context: Promise<LlamaEmbeddingContext> | null = null;
  private turn: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly model: LlamaModel,
    readonly contextSize: number,
    private readonly threads: number,
  ) {}

  /** The model's embedding size (the length of every vector). */
  get size(): number {
    return this.model.embeddingVectorSize;
  }

  /** The vectors of `texts` and their tokens; ContextLengthError for a text longer than the context. */
  embed(texts: readonly string[], signal: AbortSignal): Promise<{ vectors: number[][]; tokens: number }> {
    const run = this.turn.then(async () => {
      const tokenized = texts.map((t) => this.model.tokenize(t, true));
      for (const t of tokenized)
        if (t.length > this.contextSize) throw new ContextLengthError(t.length, this.contextSize);
      this.context ??= this.model.createEmbeddingContext({ contextSize: this.contextSize, threads: this.threads });
      const ctx = await this.context;
      const vectors: number[][] = [];
      for (const t of tokenized) {
        signal.throwIfAborted();
        vectors.push([...(await ctx.getEmbeddingFor(t)).vector]);
      }
      return { vectors, tokens: tokenized.reduce((n, t) => n + t.length, 0) };
    });
    this.turn = run.catch(() => {});
    return run;
  }

  async dispose(): Promise<void> {
    const c = this.context;
    this.context = null;
    if (c) await (await c.catch(() => null))?.dispose().catch(() => {});
  }
}

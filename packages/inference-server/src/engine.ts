/**
 * The model: one node-llama-cpp model, one context with `parallel` sequences, and one LlamaChat
 * per completion on a sequence the scheduler hands out. Generation runs in llama.cpp's native
 * threads; per request the event loop only does small things (building the prompt, counting its
 * tokens, passing text chunks on). The chat wrapper is resolved once, at load.
 */

import type {
  ChatModelFunctions,
  ChatWrapper,
  Llama,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
  Token,
} from 'node-llama-cpp';
import { installAdaptiveThreads } from './adaptive-threads.js';
import { completeChat } from './engine-chat.js';
import { completePlain, plainStops } from './engine-plain.js';
import type { Stepping } from './engine-step.js';
import { completeText, Embeddings, textPromptTokens } from './engine-text.js';
import type { CompletionInput, CompletionOutput, CompletionSettings, EngineOptions } from './engine-types.js';
import { ContextLengthError, ModelLoadError } from './errors.js';
import { DEFAULT_GRAMMAR_OPTIONS, Grammars } from './grammars.js';
import { type CompletionMessage, chatHistory } from './history.js';
import { fixIntegerGrammar } from './integer-grammar.js';
import type { ProgressTracker } from './progress.js';
import { StateCache } from './state-cache.js';

export type {
  CompletionInput,
  CompletionOutput,
  CompletionSettings,
  EngineOptions,
  FunctionCalling,
} from './engine-types.js';
export type { CompletionMessage, ToolCall } from './history.js';

type NodeLlamaCpp = typeof import('node-llama-cpp');

/** Tokens of a batch x model bytes from which a step is worth --batch-threads (see load()). */
export const BATCH_WORK_BYTES = 512 * 1024 * 1024;

export class Engine {
  private disposed = false;
  /** Embeddings: the model's weights, an embedding context of their own (engine-text.ts). */
  readonly embeddings: Embeddings;
  /** The chat template's stop texts when answers without tools or grammar take the plain path; null: never. */
  private readonly plain: string[] | null;
  /** Told when each completion begins, makes progress and ends (EngineOptions.progress). */
  private progress: ProgressTracker | null = null;
  /** Completions running on the context now: a plain answer alone on it steps directly (engine-step.ts). */
  private running = 0;
  private readonly stepping: Stepping;

  private constructor(
    private readonly lib: NodeLlamaCpp,
    private readonly llama: Llama,
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequences: readonly LlamaContextSequence[],
    private readonly chatWrapper: ChatWrapper,
    /** Saved states of evicted conversations; null: off. */
    readonly states: StateCache | null,
    public info: {
      readonly contextSize: number;
      readonly trainContextSize: number;
      readonly gpu: string | false;
      readonly threads: number;
      readonly batchThreads: number;
      readonly adaptiveThreads: boolean;
      readonly chatWrapper: string;
      /** node-llama-cpp's native binary: `prebuilt` (the npm package's) or `localBuild` (built for this CPU). */
      readonly buildType: string;
    },
    /** Schemas' grammars and tools lists, built off the event loop within a budget. */
    private readonly grammars: Grammars,
  ) {
    this.embeddings = new Embeddings(model, info.contextSize, info.threads);
    this.plain = plainStops(chatWrapper, model);
    this.stepping = { alone: () => this.running === 1, threads: info.threads };
  }

  /** Loads the model and creates the context. Throws ModelLoadError with a one-line reason. */
  static async load(options: EngineOptions): Promise<Engine> {
    const { logger } = options;
    let lib: NodeLlamaCpp;
    try {
      lib = await import('node-llama-cpp');
    } catch (err) {
      throw new ModelLoadError(`cannot load node-llama-cpp: ${(err as Error).message}`);
    }
    if (!(await fixIntegerGrammar())) {
      logger.warn('integer grammar fix unavailable: JSON-schema integers may be written with an exponent');
    }
    let llama: Llama;
    /** llama.cpp says why a load failed in its log, not in the error: keep the first reason. */
    let loadError: string | null = null;
    try {
      llama = await lib.getLlama({
        gpu: options.gpu === 'off' ? false : options.gpu,
        maxThreads: Math.max(options.threads, options.batchThreads),
        // Never build from source or download anything at run time: the installed binaries only.
        build: 'never',
        skipDownload: true,
        progressLogs: false,
        logLevel: lib.LlamaLogLevel.warn,
        logger: (level, message) => {
          const text = message.trim();
          if (text === '') return;
          if (level === 'error' || level === 'fatal') {
            const m = /error loading model: (.*)$/.exec(text);
            if (m && loadError === null) loadError = m[1]!;
            logger.error('llama.cpp', { detail: text });
          } else logger.warn('llama.cpp', { detail: text });
        },
      });
    } catch (err) {
      throw new ModelLoadError(`cannot start llama.cpp (--gpu ${options.gpu}): ${oneLine(err)}`);
    }
    let model: LlamaModel | undefined;
    try {
      model = await llama.loadModel({
        modelPath: options.modelPath,
        ...(options.signal ? { loadSignal: options.signal } : {}),
      });
      const trainContextSize = model.trainContextSize;
      const contextSize = options.contextSize ?? Math.min(trainContextSize, options.maxDefaultContextSize);
      const context = await model.createContext({
        sequences: options.parallel,
        contextSize,
        threads: options.threads,
        // Fail rather than silently shrink below what was asked for.
        failedCreationRemedy: false,
        ...(options.signal ? { createSignal: options.signal } : {}),
      });
      const sequences: LlamaContextSequence[] = [];
      for (let i = 0; i < options.parallel; i++) sequences.push(context.getSequence());
      let adaptive = false;
      // Resolving the chat wrapper renders the model's template against the known ones: it takes
      // a few hundred milliseconds of the event loop, so it happens once, here.
      const chatWrapper = lib.resolveChatWrapper(model);
      const engine = new Engine(
        lib,
        llama,
        model,
        context,
        sequences,
        chatWrapper,
        openStateCache(options),
        {
          contextSize: context.contextSize,
          trainContextSize,
          gpu: llama.gpu,
          threads: options.threads,
          batchThreads: options.batchThreads,
          adaptiveThreads: false,
          chatWrapper: chatWrapper.wrapperName,
          buildType: llama.buildType,
        },
        new Grammars(llama, lib.LlamaText, options.grammar ?? DEFAULT_GRAMMAR_OPTIONS, logger),
      );
      engine.progress = options.progress ?? null;
      // Adaptive threads (adaptive-threads.ts): --threads for light steps, --batch-threads when
      // the tokens of a batch x model size reach BATCH_WORK_BYTES (a prompt; several completions).
      if (options.batchThreads !== options.threads) {
        try {
          adaptive = installAdaptiveThreads(context, (tokens) => engine.threadsForLoad(tokens));
          if (!adaptive)
            logger.warn('adaptive threads unavailable in this node-llama-cpp: using --threads for all loads');
        } catch (err) {
          logger.warn('adaptive threads unavailable: using --threads for all loads', { error: String(err) });
        }
      }
      engine.info = { ...engine.info, adaptiveThreads: adaptive };
      return engine;
    } catch (err) {
      await model?.dispose().catch(() => {});
      await llama.dispose().catch(() => {});
      if (options.signal?.aborted) throw new ModelLoadError('model loading was cancelled');
      const why = loadError as string | null;
      throw new ModelLoadError(`model load failed: ${oneLine(err)}${why ? ` (${why})` : ''}`);
    }
  }

  /** Threads for a batch of `tokens`: --batch-threads when its work is large enough. */
  threadsForLoad(tokens: number): number {
    const work = Math.max(1, tokens) * this.model.size;
    return work >= BATCH_WORK_BYTES ? this.info.batchThreads : this.info.threads;
  }

  get parallel(): number {
    return this.sequences.length;
  }

  /**
   * A compiled grammar for a JSON schema (structured output), from a bounded cache. Rejects with
   * ApiError 400 naming `param` for a schema too complex or refused, 429 when the worker is full.
   */
  grammarFor(schema: Record<string, unknown>, param = 'response_format'): Promise<LlamaGrammar> {
    return this.grammars.forSchema(schema, param);
  }

  /**
   * Resolves once the grammars and documentation node-llama-cpp builds for these functions during
   * generation (on the event loop) were built in the worker within the budget; rejects as grammarFor.
   */
  async checkFunctions(functions: ChatModelFunctions, param = 'tools'): Promise<void> {
    await this.grammars.checkFunctions(functions as Record<string, unknown>, param);
  }

  /** The prompt's tokens as this model's chat template renders the messages (what LlamaChat evaluates). */
  promptTokens(messages: readonly CompletionMessage[], functions?: ChatModelFunctions): Token[] {
    const state = this.chatWrapper.generateContextState({
      chatHistory: chatHistory(messages),
      ...(functions ? { availableFunctions: functions, documentFunctionParams: true } : {}),
    });
    return state.contextText.tokenize(this.model.tokenizer);
  }

  /** The prompt's tokens as `complete` evaluates them: the messages as above, or a raw `prompt` (legacy). */
  requestTokens(input: Pick<CompletionSettings, 'messages' | 'prompt'>, functions?: ChatModelFunctions): Token[] {
    if (input.prompt !== undefined) return textPromptTokens(this.model, input.prompt);
    return this.promptTokens(input.messages, functions);
  }

  /** Prompt tokens of the messages as this model's chat template renders them. */
  countPromptTokens(messages: readonly CompletionMessage[], functions?: ChatModelFunctions): number {
    return this.promptTokens(messages, functions).length;
  }

  /**
   * Tokens of `tokens` that sequence `slot` holds already (its state starts with them), at most
   * all but the last (a completion evaluates at least one token). What the scheduler's slot
   * choice compares; read while the slot is free, so no generation changes it meanwhile.
   */
  cachedPrefix(slot: number, tokens: readonly Token[]): number {
    const sequence = this.sequences[slot];
    if (!sequence || tokens.length === 0) return 0;
    return Math.min(sequence.compareContextTokens(tokens as Token[]).firstDifferentIndex, tokens.length - 1);
  }

  /** Generates a completion on sequence `slot` (which the caller holds exclusively). */
  async complete(slot: number, input: CompletionInput): Promise<CompletionOutput> {
    if (this.disposed) throw new Error('the model is disposed');
    const sequence = this.sequences[slot];
    if (!sequence) throw new Error(`no sequence ${slot}`);
    // Counted from the start: a completion alone on the context, stepping directly, lets go of the
    // context's lock at its next step once another one begins (its saved-state work needs it too).
    this.running++;
    try {
      return await this.completeOn(sequence, slot, input);
    } finally {
      this.running--;
    }
  }

  private async completeOn(
    sequence: LlamaContextSequence,
    slot: number,
    input: CompletionInput,
  ): Promise<CompletionOutput> {
    const calling = input.functionCalling;
    const tokens = input.promptTokens ?? this.requestTokens(input, calling?.functions);
    const promptTokens = tokens.length;
    const room = this.info.contextSize - promptTokens - 1;
    if (room < 1) throw new ContextLengthError(promptTokens, this.info.contextSize);
    const maxTokens = Math.min(input.maxTokens ?? room, room);
    input.signal.throwIfAborted();
    // The sequence keeps its state between completions: LlamaChat evaluates only the tokens after
    // the prefix it shares with the prompt. A saved state may bring a longer prefix back.
    const restoredTokens = this.states ? (await this.states.prepare(sequence, tokens)).restored : 0;
    const cachedTokens = this.cachedPrefix(slot, tokens);
    input.signal.throwIfAborted();
    const reuse = { promptTokens, cachedTokens, restoredTokens: Math.min(restoredTokens, cachedTokens) };
    // The progress tracker (progress.ts) sees the prompt's size, then every token, then the end.
    const progress = this.progress;
    progress?.begin(slot, promptTokens);
    try {
      const onTokens = (n: number) => {
        progress?.progress(slot);
        input.onTokens?.(n);
      };
      // A raw prompt (legacy completions) is continued as it is; LlamaCompletion reuses the prefix too.
      if (input.prompt !== undefined) {
        return { ...(await completeText(this.lib, sequence, tokens, maxTokens, { ...input, onTokens })), ...reuse };
      }
      // An answer with no tools and no grammar is generated from the token loop itself (engine-plain.ts).
      const chat =
        this.plain && !calling && !input.grammar
          ? await completePlain(sequence, tokens, maxTokens, this.plain, { ...input, onTokens }, this.stepping)
          : await completeChat(this.lib, this.chatWrapper, sequence, maxTokens, { ...input, onTokens });
      return { ...chat, ...reuse };
    } finally {
      progress?.end(slot);
    }
  }

  /** Frees the context, the model and llama.cpp. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.embeddings.dispose();
    this.states?.dispose();
    await this.grammars.close();
    await this.context.dispose().catch(() => {});
    await this.model.dispose().catch(() => {});
    await this.llama.dispose().catch(() => {});
  }
}

/** The saved-state cache the options ask for; null when off or when its directory is unusable. */
function openStateCache(options: EngineOptions): StateCache | null {
  const c = options.stateCache;
  if (!c || c.maxBytes <= 0) return null;
  try {
    return new StateCache(c.dir, c.maxBytes, options.logger);
  } catch (err) {
    options.logger.warn('saved-state cache off: its directory is unusable', { dir: c.dir, error: oneLine(err) });
    return null;
  }
}

function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * The model: one node-llama-cpp model, one context with `parallel` sequences, and one LlamaChat
 * per completion on a sequence the scheduler hands out. Generation runs in llama.cpp's native
 * threads; per request the event loop only does small things (building the prompt, counting its
 * tokens, passing text chunks on). The chat wrapper is resolved once, at load.
 */

import { readdirSync } from 'node:fs';
import { setPriority } from 'node:os';
import type {
  ChatModelFunctions,
  ChatWrapper,
  ChatWrapperGenerateContextStateOptions,
  Llama,
  LlamaChatResponse,
  LlamaContext,
  LlamaContextSequence,
  LlamaGrammar,
  LlamaModel,
} from 'node-llama-cpp';
import type { GpuChoice } from './config.js';
import { ContextLengthError, ModelLoadError } from './errors.js';
import { type CompletionMessage, chatHistory } from './history.js';
import { fixIntegerGrammar } from './integer-grammar.js';
import type { Logger } from './logger.js';
import type { ProgressTracker } from './progress.js';
import { GrammarCache } from './schema.js';

export type { CompletionMessage, ToolCall } from './history.js';

export interface EngineOptions {
  readonly modelPath: string;
  readonly gpu: GpuChoice;
  /** CPU threads while one completion runs. */
  readonly threads: number;
  /** CPU threads while several completions run (their tokens are evaluated in one batch). */
  readonly batchThreads: number;
  readonly parallel: number;
  /** Tokens per sequence; null: the model's own, at most `maxDefaultContextSize`. */
  readonly contextSize: number | null;
  readonly maxDefaultContextSize: number;
  readonly logger: Logger;
  /** Aborts loading (SIGTERM while loading). */
  readonly signal?: AbortSignal;
  /** Told when each completion begins, makes progress and ends. */
  readonly progress?: ProgressTracker;
}

/** What a completion is asked: the conversation and the sampling settings. */
export interface CompletionSettings {
  readonly messages: readonly CompletionMessage[];
  /** null: as many as the context has room for. */
  readonly maxTokens: number | null;
  readonly temperature: number;
  readonly topP: number;
  readonly seed: number | null;
  readonly stop: readonly string[];
  readonly frequencyPenalty: number;
  readonly presencePenalty: number;
}

/** Function calling: the functions, whether the model must call one, how many calls at most. */
export interface FunctionCalling {
  readonly functions: ChatModelFunctions;
  readonly force: boolean;
  readonly maxCalls: number;
}

export interface CompletionInput extends CompletionSettings {
  readonly signal: AbortSignal;
  /** The model may (or must) call these functions; not with `grammar`. */
  readonly functionCalling?: FunctionCalling;
  /** Constrains the text (structured output). */
  readonly grammar?: LlamaGrammar;
  /** Each piece of a function call's arguments, as it comes (streaming). */
  readonly onCallText?: (callIndex: number, name: string, text: string) => void;
  /** Each piece of generated text, as it comes (streaming). */
  readonly onText?: (text: string) => void;
  /** Tokens generated so far, after each step. */
  readonly onTokens?: (count: number) => void;
}

export interface CompletionOutput {
  readonly text: string;
  readonly finishReason: 'stop' | 'length' | 'tool_calls';
  /** The calls the model made (name and arguments as JSON text); empty when none. */
  readonly calls: readonly { readonly name: string; readonly arguments: string }[];
  readonly promptTokens: number;
  readonly completionTokens: number;
}

type NodeLlamaCpp = typeof import('node-llama-cpp');

/**
 * Linux: lowers the scheduling priority (nice 10) of every thread of this process but the main
 * one. llama.cpp's compute threads are created by the thread-pool thread that runs a decode and
 * inherit its priority, so on a host with few cores the event loop (HTTP, /v1/models) always
 * gets a core at once when it has work, and generation takes the rest. Elsewhere: nothing.
 */
export function lowerWorkerThreadPriority(nice = 10): number {
  let n = 0;
  try {
    for (const tid of readdirSync('/proc/self/task')) {
      if (Number(tid) === process.pid) continue;
      try {
        setPriority(Number(tid), nice);
        n++;
      } catch {
        // a thread that ended meanwhile, or not permitted
      }
    }
  } catch {
    // not Linux
  }
  return n;
}

/** Internals of node-llama-cpp 3.22 that adaptive threads use; checked before use. */
interface ContextInternals {
  _ctx?: { setThreads?: (threads: number) => void };
}

/** Completions x model bytes from which a step is worth --batch-threads (see load()). */
export const BATCH_WORK_BYTES = 512 * 1024 * 1024;

export class Engine {
  private disposed = false;
  /** Completions generating now (adaptive threads). */
  private generating = 0;
  /** Told when each completion begins, makes progress and ends (EngineOptions.progress). */
  private progress: ProgressTracker | null = null;
  /** Compiled JSON-schema grammars, one per distinct schema. */
  private readonly grammars = new GrammarCache<LlamaGrammar>((schema) =>
    // The schema was checked (schema.ts) for what the grammar enforces.
    this.llama.createGrammarForJsonSchema(schema as never),
  );

  private constructor(
    private readonly lib: NodeLlamaCpp,
    private readonly llama: Llama,
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequences: readonly LlamaContextSequence[],
    private readonly chatWrapper: ChatWrapper,
    public info: {
      readonly contextSize: number;
      readonly trainContextSize: number;
      readonly gpu: string | false;
      readonly threads: number;
      readonly batchThreads: number;
      readonly adaptiveThreads: boolean;
      readonly chatWrapper: string;
    },
  ) {}

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
      const engine = new Engine(lib, llama, model, context, sequences, chatWrapper, {
        contextSize: context.contextSize,
        trainContextSize,
        gpu: llama.gpu,
        threads: options.threads,
        batchThreads: options.batchThreads,
        adaptiveThreads: false,
        chatWrapper: chatWrapper.wrapperName,
      });
      engine.progress = options.progress ?? null;
      // Adaptive threads: a step of a small model is too little work to divide (measured on a
      // 2-CPU host: 2 threads 1.7x slower than 1 for one completion of a 100 M model, 25x for
      // the tiny one), while several completions of a large enough model share a batch that
      // divides well (4 completions of the 100 M model: 2 threads 1.3x faster). So: --threads,
      // and --batch-threads when completions x model size reach BATCH_WORK_BYTES.
      // node-llama-cpp sets the threads before every batch; that call picks the count.
      if (options.batchThreads !== options.threads) {
        const native = (context as unknown as ContextInternals)._ctx;
        const set = native?.setThreads;
        if (native && typeof set === 'function') {
          try {
            // The addon's method is read-only on its prototype: define one on the instance.
            Object.defineProperty(native, 'setThreads', {
              configurable: true,
              writable: true,
              value: (_n: number) => set.call(native, engine.threadsForLoad()),
            });
            adaptive = true;
          } catch (err) {
            logger.warn('adaptive threads unavailable: using --threads for all loads', { error: String(err) });
          }
        } else {
          logger.warn('adaptive threads unavailable in this node-llama-cpp: using --threads for all loads');
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

  /** Threads for the next batch: --batch-threads when the work per step is large enough. */
  threadsForLoad(): number {
    const work = Math.max(1, this.generating) * this.model.size;
    return work >= BATCH_WORK_BYTES ? this.info.batchThreads : this.info.threads;
  }

  get parallel(): number {
    return this.sequences.length;
  }

  /** A compiled grammar for a JSON schema (structured output), from a bounded cache. */
  grammarFor(schema: Record<string, unknown>): Promise<LlamaGrammar> {
    return this.grammars.get(schema);
  }

  /** Prompt tokens of the messages as this model's chat template renders them. */
  countPromptTokens(messages: readonly CompletionMessage[], functions?: ChatModelFunctions): number {
    const state = this.chatWrapper.generateContextState({
      chatHistory: chatHistory(messages),
      ...(functions ? { availableFunctions: functions, documentFunctionParams: true } : {}),
    });
    return state.contextText.tokenize(this.model.tokenizer).length;
  }

  /** Generates a completion on sequence `slot` (which the caller holds exclusively). */
  async complete(slot: number, input: CompletionInput): Promise<CompletionOutput> {
    if (this.disposed) throw new Error('the model is disposed');
    const sequence = this.sequences[slot];
    if (!sequence) throw new Error(`no sequence ${slot}`);
    const history = chatHistory(input.messages);
    const calling = input.functionCalling;
    const promptTokens = this.countPromptTokens(input.messages, calling?.functions);
    const room = this.info.contextSize - promptTokens - 1;
    if (room < 1) throw new ContextLengthError(promptTokens, this.info.contextSize);
    const maxTokens = Math.min(input.maxTokens ?? room, room);
    input.signal.throwIfAborted();
    const chat = new this.lib.LlamaChat({
      contextSequence: sequence,
      chatWrapper: calling?.force ? forcedCallWrapper(this.chatWrapper) : this.chatWrapper,
    });
    let completionTokens = 0;
    this.generating++;
    const progress = this.progress;
    progress?.begin(slot, promptTokens);
    try {
      const penalize = input.frequencyPenalty > 0 || input.presencePenalty > 0;
      const response: LlamaChatResponse<ChatModelFunctions> = await chat.generateResponse(history, {
        maxTokens,
        temperature: input.temperature,
        topP: input.topP,
        ...(input.seed !== null ? { seed: input.seed } : {}),
        ...(input.stop.length > 0 ? { customStopTriggers: input.stop } : {}),
        repeatPenalty: penalize
          ? {
              penalty: 1,
              frequencyPenalty: Math.min(1, Math.max(0, input.frequencyPenalty)),
              presencePenalty: Math.min(1, Math.max(0, input.presencePenalty)),
            }
          : false,
        signal: input.signal,
        onToken: (tokens) => {
          completionTokens += tokens.length;
          progress?.progress(slot);
          input.onTokens?.(completionTokens);
        },
        ...(input.onText ? { onTextChunk: input.onText } : {}),
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
        promptTokens,
        completionTokens: reason === 'maxTokens' ? Math.max(completionTokens, maxTokens) : completionTokens,
      };
    } finally {
      progress?.end(slot);
      this.generating--;
      chat.dispose({ disposeSequence: false });
    }
  }

  /** Frees the context, the model and llama.cpp. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.context.dispose().catch(() => {});
    await this.model.dispose().catch(() => {});
    await this.llama.dispose().catch(() => {});
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

function oneLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.replace(/\s+/g, ' ').trim();
}

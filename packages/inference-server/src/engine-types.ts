/**
 * What the engine is given and answers: its options at load, a completion's settings and input,
 * and its output. Types only: the engine's modules and the request parsers share them.
 */
import type { ChatModelFunctions, LlamaGrammar, Token } from 'node-llama-cpp';
import type { GpuChoice } from './config.js';
import type { GrammarOptions } from './grammars.js';
import type { CompletionMessage } from './history.js';
import type { Logger } from './logger.js';
import type { ProgressTracker } from './progress.js';

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
  /** The saved-state cache (state-cache.ts): its directory and bound; null or 0 bytes: none. */
  readonly stateCache?: { readonly dir: string; readonly maxBytes: number } | null;
  /** Aborts loading (SIGTERM while loading). */
  readonly signal?: AbortSignal;
  /** The grammar worker's budget, and the bytes the grammar cache keeps. */
  readonly grammar?: GrammarOptions;
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
  /** Sample from the k most likely tokens only; null or absent: all. */
  readonly topK?: number | null;
  readonly seed: number | null;
  readonly stop: readonly string[];
  readonly frequencyPenalty: number;
  readonly presencePenalty: number;
  /** Raw text to continue without the chat template (legacy completions); `messages` are then unused. */
  readonly prompt?: string;
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
  /** The prompt's tokens when the caller has them already (`promptTokens()` of the same input). */
  readonly promptTokens?: readonly Token[];
}

export interface CompletionOutput {
  readonly text: string;
  readonly finishReason: 'stop' | 'length' | 'tool_calls';
  /** The calls the model made (name and arguments as JSON text); empty when none. */
  readonly calls: readonly { readonly name: string; readonly arguments: string }[];
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** The stop string (of `stop`) that ended the text; null when something else ended it. */
  readonly stopSequence: string | null;
  /** Prompt tokens not evaluated again: the sequence held them (or a saved state restored them). */
  readonly cachedTokens: number;
  /** Of those, the tokens a saved state restored. */
  readonly restoredTokens: number;
}

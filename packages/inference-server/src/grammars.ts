/**
 * The engine's grammars: a schema's grammar text from the grammar worker (grammar-builder.ts),
 * parsed by llama.cpp here (fast: milliseconds for a megabyte of text, measured), kept in a cache
 * bounded in entries and bytes; and tools lists checked in the worker before node-llama-cpp
 * builds their grammars itself, on the event loop, while it generates.
 */
import type { Llama, LlamaGrammar, LlamaText } from 'node-llama-cpp';
import { type GrammarBudget, GrammarBuilder } from './grammar-builder.js';
import { schemaTooComplex } from './limits.js';
import type { Logger } from './logger.js';
import { GrammarCache } from './schema.js';

export interface GrammarOptions extends GrammarBudget {
  /** Bytes of schema and grammar text the cache keeps. */
  readonly cacheBytes: number;
}

export const DEFAULT_GRAMMAR_OPTIONS: GrammarOptions = {
  timeoutMs: 2_000,
  memoryMb: 256,
  maxWaiting: 64,
  cacheBytes: 16 * 1024 * 1024,
};

/** Grammar text longer than this is refused before llama.cpp parses it (on the event loop). */
export const MAX_GRAMMAR_TEXT_BYTES = 2 * 1024 * 1024;

export class Grammars {
  private readonly builder: GrammarBuilder;
  /** Compiled JSON-schema grammars, one per distinct schema (checked by schema.ts). */
  private readonly compiled: GrammarCache<LlamaGrammar>;
  /** Tools lists whose grammars and documentation the worker built in time. */
  private readonly toolChecks: GrammarCache<true>;

  constructor(llama: Llama, text: typeof LlamaText, options: GrammarOptions, logger: Logger) {
    this.builder = new GrammarBuilder(options, logger);
    this.builder.warm();
    this.compiled = new GrammarCache<LlamaGrammar>(
      async (schema, param) => {
        const grammar = await this.builder.build({ kind: 'schema', schema }, param);
        if (grammar.length > MAX_GRAMMAR_TEXT_BYTES) {
          throw schemaTooComplex(param, `its grammar is ${grammar.length} bytes; at most ${MAX_GRAMMAR_TEXT_BYTES}`);
        }
        return llama.createGrammar({
          grammar,
          // As node-llama-cpp's JSON-schema grammar.
          stopGenerationTriggers: [text('\n'.repeat(4))],
          trimWhitespaceSuffix: true,
        });
      },
      64,
      options.cacheBytes,
      (g) => g.grammar.length,
    );
    this.toolChecks = new GrammarCache<true>(
      async (functions, param) => {
        await this.builder.build({ kind: 'tools', functions }, param);
        return true;
      },
      64,
      options.cacheBytes,
    );
  }

  /** The grammar of a schema; rejects with ApiError 400 naming `param`, or 429 when the worker is full. */
  forSchema(schema: Record<string, unknown>, param: string): Promise<LlamaGrammar> {
    return this.compiled.get(schema, param);
  }

  /** Resolves once these functions' grammars and documentation were built in time; rejects as forSchema. */
  async checkFunctions(functions: Record<string, unknown>, param: string): Promise<void> {
    await this.toolChecks.get(functions, param);
  }

  close(): Promise<void> {
    return this.builder.close();
  }
}

/**
 * POST /v1/completions (OpenAI's legacy text completions, which Continue's autocomplete and
 * older tools use) on the one request pipeline: each prompt is continued as raw text, without
 * the chat template. `prompt` a string or an array of strings (one choice each), `max_tokens`
 * (16 when absent, as OpenAI), `stop`, `n`, streaming; `echo`, `suffix`, `logprobs` and token
 * arrays are refused with a 400 naming them.
 */
import { randomBytes } from 'node:crypto';
import { z } from '@vigil/shared-types';
import { ContextLengthError } from '../errors.js';
import { checkStop } from '../limits.js';
import { invalid as badRequest, toApiError, usage } from '../openai.js';
import type { Output, Protocol } from '../pipeline.js';
import { sse } from '../pipeline.js';
import type { CompletionRequest, RequestLimits } from '../request.js';
import { check, objectAt } from './common.js';

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => z.number().int().min(min).max(max).nullish();
const number = (min: number, max: number) => z.number().min(min).max(max).nullish();

const top = z.object({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.array(z.string()).min(1)]),
  max_tokens: integer(1),
  temperature: number(0, 2),
  top_p: number(0, 1),
  n: integer(1, 128),
  best_of: integer(1, 128),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  echo: z.boolean().nullish(),
  suffix: z.string().nullish(),
  seed: z.number().int().nullish(),
  frequency_penalty: number(-2, 2),
  presence_penalty: number(-2, 2),
  logprobs: integer(0, 5),
  logit_bias: z.record(z.string(), z.number()).nullish(),
  user: z.string().nullish(),
});

/** OpenAI's default `max_tokens` of a legacy completion. */
export const LEGACY_MAX_TOKENS = 16;

const unsupported = (message: string, param: string) => badRequest(message, param, 'unsupported_value');

export function parseLegacyRequest(raw: unknown, limits: RequestLimits): CompletionRequest {
  const { maxN } = limits;
  const body = objectAt(raw, null);
  const t = check(top, body, body, []);
  if (t.echo === true) throw unsupported("'echo' is not supported on this server.", 'echo');
  if (t.suffix) throw unsupported("'suffix' (insertion) is not supported on this server.", 'suffix');
  if (t.logprobs !== null && t.logprobs !== undefined) throw unsupported('logprobs are not supported', 'logprobs');
  const prompts = typeof t.prompt === 'string' ? [t.prompt] : t.prompt;
  const n = t.n ?? 1;
  if (n > 1 && prompts.length > 1) throw unsupported("'n' above 1 with several prompts is not supported.", 'n');
  if (t.best_of && t.best_of !== n) throw unsupported("'best_of' other than 'n' is not supported.", 'best_of');
  if (Math.max(n, prompts.length) > maxN) {
    throw badRequest(
      `Invalid 'n': at most ${maxN} choices per request on this server (--max-n); got ${Math.max(n, prompts.length)}.`,
      'n',
      'invalid_value',
    );
  }
  const stream = t.stream === true;
  if (t.stream_options && !stream) {
    throw badRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.", 'stream_options');
  }
  const stop = (typeof t.stop === 'string' ? [t.stop] : (t.stop ?? [])).filter((s) => s !== '');
  checkStop(stop, limits.input);
  return {
    model: t.model,
    messages: [],
    prompts,
    maxTokens: t.max_tokens ?? LEGACY_MAX_TOKENS,
    temperature: t.temperature ?? 1,
    topP: t.top_p ?? 1,
    seed: t.seed === null || t.seed === undefined ? null : t.seed >>> 0,
    stop,
    frequencyPenalty: t.frequency_penalty ?? 0,
    presencePenalty: t.presence_penalty ?? 0,
    stream,
    includeUsage: t.stream_options?.include_usage === true,
    n: Math.max(n, prompts.length),
    tools: [],
    toolChoice: 'none',
    parallelToolCalls: false,
    responseFormat: { type: 'text' },
  };
}

export function legacyProtocol(limits: RequestLimits): Protocol {
  return {
    parse: (raw) => parseLegacyRequest(raw, limits),
    error: (err) =>
      err instanceof ContextLengthError
        ? badRequest(err.message, 'prompt', 'context_length_exceeded')
        : toApiError(err),
    errorBody: (e) => e.toJSON(),
    output: (body, write) => legacyOutput(body, write),
  };
}

function legacyOutput(body: CompletionRequest, write: (text: string) => void): Output {
  const id = `cmpl-${randomBytes(12).toString('hex')}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    write(sse(null, { id, object: 'text_completion', created, model: body.model, choices, ...extra }));
  return {
    begin: () => {},
    text: (index, text) => chunk([{ index, text, logprobs: null, finish_reason: null }]),
    callText: () => {},
    endChoice: (index, c) => chunk([{ index, text: '', logprobs: null, finish_reason: c.finishReason }]),
    finish: (g) => {
      const u = usage(g.promptTokens, g.completionTokens, g.cachedTokens);
      if (!body.stream) {
        return {
          id,
          object: 'text_completion',
          created,
          model: body.model,
          choices: g.choices.map((c, index) => ({
            index,
            text: c.text,
            logprobs: null,
            finish_reason: c.finishReason,
          })),
          usage: u,
        };
      }
      if (body.includeUsage) chunk([], { usage: u });
      write(sse(null, '[DONE]'));
      return undefined;
    },
    fail: (e) => {
      write(sse(null, e.toJSON()));
      write(sse(null, '[DONE]'));
    },
  };
}

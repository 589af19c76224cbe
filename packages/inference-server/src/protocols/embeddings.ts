/**
 * POST /v1/embeddings: vectors of the loaded model from its embedding context (engine-text.ts).
 * `input` a string or an array of strings, `encoding_format` float or base64 (little-endian
 * float32, as OpenAI), usage `prompt_tokens`; `dimensions` and token arrays are refused with a
 * 400 naming them. A request holds one of the scheduler's slots while it runs, so the queue (429
 * + Retry-After), the deadline and the client leaving apply as to generation, and embeddings
 * never run beside more than --parallel other requests.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from '@vigil/shared-types';
import type { ServerContext } from '../context.js';
import { ContextLengthError } from '../errors.js';
import { sendJson } from '../http.js';
import { invalid, toApiError } from '../openai.js';
import { checkModel, readJson, sendProtocolError } from '../pipeline.js';
import { requestAbort } from '../request-abort.js';
import { check, objectAt } from './common.js';

const top = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1).max(2048)]),
  encoding_format: z.enum(['float', 'base64']).nullish(),
  dimensions: z.number().int().nullish(),
  user: z.string().nullish(),
});

export interface EmbeddingsRequest {
  readonly model: string;
  readonly input: readonly string[];
  readonly base64: boolean;
}

export function parseEmbeddingsRequest(raw: unknown): EmbeddingsRequest {
  const body = objectAt(raw, null);
  const t = check(top, body, body, []);
  if (t.dimensions !== null && t.dimensions !== undefined) {
    throw invalid(
      "'dimensions' is not supported: the vectors have the model's own size.",
      'dimensions',
      'unsupported_value',
    );
  }
  return {
    model: t.model,
    input: typeof t.input === 'string' ? [t.input] : t.input,
    base64: t.encoding_format === 'base64',
  };
}

/** A vector as OpenAI's base64: the bytes of little-endian float32s. */
export function base64Vector(v: readonly number[]): string {
  const b = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) b.writeFloatLE(v[i]!, i * 4);
  return b.toString('base64');
}

/** Serves POST /v1/embeddings; never rejects. */
export async function serveEmbeddings(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
): Promise<void> {
  const end = requestAbort(ctx, res, 'The embeddings');
  let held: number | null = null;
  try {
    const body = parseEmbeddingsRequest(await readJson(ctx, req));
    const eng = checkModel(ctx, body.model);
    held = await ctx.scheduler.acquire(end.signal);
    end.signal.throwIfAborted();
    const { vectors, tokens } = await Promise.race([eng.embeddings.embed(body.input, end.signal), end.aborted]);
    ctx.scheduler.release(held);
    held = null;
    ctx.metrics.tokens(tokens, 0);
    sendJson(res, 200, {
      object: 'list',
      data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: body.base64 ? base64Vector(v) : v })),
      model: body.model,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    });
    ctx.access(req, listener, startedNs, 200, { model: body.model, inputs: body.input.length, prompt_tokens: tokens });
  } catch (err) {
    const e =
      err instanceof ContextLengthError ? invalid(err.message, 'input', 'context_length_exceeded') : toApiError(err);
    if (e.status !== 499) sendProtocolError(res, { errorBody: (x) => x.toJSON() }, e);
    ctx.access(req, listener, startedNs, e.status, { error: e.wireCode });
  } finally {
    if (held !== null) ctx.scheduler.release(held);
    end.done();
  }
}

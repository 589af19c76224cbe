/**
 * The inference server's catalogue drives what a client gets: each catalogued error that reaches a
 * client is answered with the catalogue's HTTP status and OpenAI code, in OpenAI's shape as before.
 */
import { describe, expect, it } from '@jest/globals';
import { memoryLogger } from '@vigil/shared-types';
import {
  ApiError,
  ContextLengthError,
  EndReason,
  GrammarWorkerError,
  INFERENCE_ERRORS,
  invalid,
  QueueFullError,
} from '../src/errors.js';
import { GrammarBuilder } from '../src/grammar-builder.js';
import { toApiError } from '../src/openai.js';

const body = (e: ApiError) => ({ status: e.status, ...e.toJSON().error, headers: e.headers, code: e.code });

describe('the catalogue of the inference server', () => {
  it('answers each catalogued error with its HTTP status and OpenAI code', () => {
    const busy = toApiError(new QueueFullError(3, 2));
    expect(busy).toMatchObject({ status: 429, type: 'rate_limit_exceeded', openaiCode: 'rate_limit_exceeded' });
    expect(busy.headers).toEqual({ 'retry-after': '2' });
    const long = toApiError(new ContextLengthError(900, 512));
    expect(long.toJSON().error).toMatchObject({ type: 'invalid_request_error', param: 'messages' });
    expect(long).toMatchObject({ status: 400, openaiCode: 'context_length_exceeded' });
    expect(toApiError(new EndReason('timeout', 'too slow'))).toMatchObject({
      status: 504,
      type: 'timeout',
      openaiCode: 'request_timeout',
      message: 'too slow',
    });
    const stopping = toApiError(new EndReason('shutdown', 'stopping'));
    expect(stopping).toMatchObject({ status: 503, type: 'server_error', openaiCode: 'shutting_down' });
    expect(stopping.headers).toEqual({ 'retry-after': '5' });
    expect(toApiError(new EndReason('client', 'gone'))).toMatchObject({ status: 499, openaiCode: 'client_closed' });
    // Each mapping is the catalogue's.
    for (const [err, code] of [
      [new QueueFullError(1, 1), 'VIGIL_ERR_INFERENCE_BUSY'],
      [new ContextLengthError(2, 1), 'VIGIL_ERR_INFERENCE_CONTEXT_LENGTH'],
      [new EndReason('timeout', 't'), 'VIGIL_ERR_INFERENCE_TIMEOUT'],
      [new EndReason('shutdown', 's'), 'VIGIL_ERR_INFERENCE_SHUTTING_DOWN'],
      [new EndReason('client', 'c'), 'VIGIL_ERR_INFERENCE_CLIENT_CLOSED'],
      [new GrammarWorkerError(), 'VIGIL_ERR_INFERENCE_GRAMMAR_WORKER'],
    ] as const) {
      const spec = INFERENCE_ERRORS[code];
      expect(err.code).toBe(code);
      const answered = toApiError(err);
      expect([answered.status, answered.wireCode]).toEqual([spec.http, spec.wire]);
    }
  });

  it('keeps the protocol code of a request error apart from its catalogue code', () => {
    const e = invalid("Invalid 'n': expected at most 8", 'n', 'invalid_value');
    expect(body(e)).toMatchObject({ status: 400, code: 'VIGIL_ERR_INFERENCE_REQUEST', type: 'invalid_request_error' });
    expect(e.toJSON()).toEqual({
      error: {
        message: "Invalid 'n': expected at most 8",
        type: 'invalid_request_error',
        param: 'n',
        code: 'invalid_value',
      },
    });
    expect(e.wireCode).toBe('invalid_value');
    expect(new ApiError(500, 'x', 'server_error').wireCode).toBe('server_error');
  });

  it('answers a grammar still waiting when the server stops with 503 shutting_down', async () => {
    const builder = new GrammarBuilder({ timeoutMs: 60_000, memoryMb: 64, maxWaiting: 4 }, memoryLogger());
    const waiting = builder.build({ kind: 'schema', schema: { type: 'object' } }, 'response_format').catch((e) => e);
    await builder.close();
    const err = await waiting;
    expect(err).toBeInstanceOf(EndReason);
    expect(toApiError(err)).toMatchObject({ status: 503, openaiCode: 'shutting_down' });
    // And a job asked for after the stop.
    const after = await builder
      .build({ kind: 'schema', schema: { type: 'object' } }, 'response_format')
      .catch((e) => e);
    expect(toApiError(after)).toMatchObject({ status: 503, openaiCode: 'shutting_down' });
  });
});

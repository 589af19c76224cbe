/**
 * Every error this package throws, each a VigilError: a stable `code`, a message, an optional
 * hint and the exit code it maps to when it ends the process (78 configuration, else 1).
 */
import type { OpenAIError } from '@vigil/shared-types';
import { VigilError } from '@vigil/shared-types';

export { ConfigError, exitCodeFor, VigilError } from '@vigil/shared-types';
export { ListenError } from '@vigil/shared-types/node';

/**
 * A start-up failure that is not a configuration error (manifest mismatch, bad signature, model
 * load failure): one line, exit 1.
 */
export class StartupError extends VigilError {}

/** Why a manifest check failed: `mismatch` → "manifest verification failed", `signature` → "signature invalid". */
export class ManifestError extends VigilError {
  constructor(
    readonly kind: 'mismatch' | 'signature',
    message: string,
  ) {
    super(kind === 'mismatch' ? 'EMANIFEST' : 'ESIGNATURE', message);
  }
}

/** A model file that is not a usable GGUF file (checked before llama.cpp sees it). */
export class GgufError extends VigilError {
  constructor(message: string) {
    super('EGGUF', message);
  }
}

/** node-llama-cpp could not load the model or start. */
export class ModelLoadError extends VigilError {
  constructor(message: string) {
    super('ELOAD', message);
  }
}

/**
 * An error answered with an HTTP status and an OpenAI-shaped body. `code` is OpenAI's `code` when
 * it has one, else its `type`; `openaiCode` is what the body says (null for many errors, as OpenAI).
 */
export class ApiError extends VigilError {
  readonly openaiCode: string | null;
  constructor(
    readonly status: number,
    message: string,
    readonly type: string = 'invalid_request_error',
    readonly param: string | null = null,
    code: string | null = null,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(code ?? type, message);
    this.openaiCode = code;
  }

  toJSON(): OpenAIError {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.openaiCode } };
  }
}

/** A 400 invalid_request_error naming the field (`param`), as OpenAI answers a bad request. */
export const invalid = (message: string, param: string | null = null, code: string | null = null): ApiError =>
  new ApiError(400, message, 'invalid_request_error', param, code);

/** Every sequence is busy and the queue is full (HTTP 429 with Retry-After). */
export class QueueFullError extends VigilError {
  constructor(
    readonly waiting: number,
    readonly retryAfterS: number,
  ) {
    super(
      'rate_limit_exceeded',
      `The server is busy: all sequences are generating and ${waiting} requests are waiting. Retry later.`,
    );
  }
}

/** The prompt does not fit the context (HTTP 400 context_length_exceeded). */
export class ContextLengthError extends VigilError {
  constructor(
    readonly promptTokens: number,
    readonly contextSize: number,
  ) {
    super(
      'context_length_exceeded',
      `This model's context is ${contextSize} tokens per request, but the messages take ${promptTokens} tokens. Shorten the messages.`,
    );
  }
}

/** Why a completion ended early: each becomes a clear error, never an empty reply. */
export class EndReason extends VigilError {
  constructor(
    readonly kind: 'timeout' | 'shutdown' | 'client',
    message: string,
  ) {
    super(kind === 'timeout' ? 'request_timeout' : kind === 'shutdown' ? 'shutting_down' : 'client_closed', message);
  }
}

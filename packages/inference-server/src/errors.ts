/**
 * The inference server's error catalogue and every error this package throws, each a VigilError:
 * a stable `code`, a message, an optional hint and the exit code it maps to when it ends the
 * process (78 configuration, else 1). An error a client gets is answered in its protocol's shape
 * (OpenAI's `type`/`code`, Anthropic's `type`); the catalogue gives its HTTP status and OpenAI code.
 */
import type { OpenAIError } from '@vigil/shared-types';
import { defineErrors, VigilError } from '@vigil/shared-types';

export { ConfigError, exitCodeFor, VigilError } from '@vigil/shared-types';
export { ListenError } from '@vigil/shared-types/node';

export const INFERENCE_ERRORS = defineErrors({
  VIGIL_ERR_INFERENCE_MANIFEST: {
    message: 'manifest verification failed: the model is not the one the manifest lists',
  },
  VIGIL_ERR_INFERENCE_SIGNATURE: { message: 'signature invalid: the manifest is not signed by the given key' },
  VIGIL_ERR_INFERENCE_GGUF: { message: 'the model file is not a usable GGUF file (checked before llama.cpp reads it)' },
  VIGIL_ERR_INFERENCE_LOAD: { message: 'node-llama-cpp could not load the model or start' },
  VIGIL_ERR_INFERENCE_STOPPED: { message: 'stopped while the model was loading' },
  VIGIL_ERR_INFERENCE_REQUEST: {
    message: "a request answered with an error in its protocol's shape; `status`, `type` and `openaiCode` say which",
  },
  VIGIL_ERR_INFERENCE_BUSY: {
    message: 'every sequence is generating and the queue is full',
    http: 429,
    wire: 'rate_limit_exceeded',
  },
  VIGIL_ERR_INFERENCE_CONTEXT_LENGTH: {
    message: 'the prompt does not fit the context',
    http: 400,
    wire: 'context_length_exceeded',
  },
  VIGIL_ERR_INFERENCE_TIMEOUT: {
    message: 'a completion ran past --request-timeout',
    http: 504,
    wire: 'request_timeout',
  },
  VIGIL_ERR_INFERENCE_SHUTTING_DOWN: {
    message: 'the server is stopping: work in flight past --shutdown-grace is aborted',
    http: 503,
    wire: 'shutting_down',
  },
  VIGIL_ERR_INFERENCE_CLIENT_CLOSED: { message: 'the client left before the answer', http: 499, wire: 'client_closed' },
  VIGIL_ERR_INFERENCE_GRAMMAR_WORKER: {
    message: 'the worker that builds grammars for structured output exited',
    http: 500,
    wire: 'internal_error',
  },
});

type Code = keyof typeof INFERENCE_ERRORS;

/**
 * A start-up failure that is not a configuration error (manifest mismatch, bad signature, model
 * load failure): one line, exit 1.
 */
export class StartupError extends VigilError {
  constructor(
    code: Extract<
      Code,
      | 'VIGIL_ERR_INFERENCE_MANIFEST'
      | 'VIGIL_ERR_INFERENCE_SIGNATURE'
      | 'VIGIL_ERR_INFERENCE_LOAD'
      | 'VIGIL_ERR_INFERENCE_STOPPED'
    >,
    message: string,
  ) {
    super(INFERENCE_ERRORS[code], message);
  }
}

/** Why a manifest check failed: `mismatch` → "manifest verification failed", `signature` → "signature invalid". */
export class ManifestError extends VigilError {
  constructor(
    readonly kind: 'mismatch' | 'signature',
    message: string,
  ) {
    super(
      INFERENCE_ERRORS[kind === 'mismatch' ? 'VIGIL_ERR_INFERENCE_MANIFEST' : 'VIGIL_ERR_INFERENCE_SIGNATURE'],
      message,
    );
  }
}

/** A model file that is not a usable GGUF file (checked before llama.cpp sees it). */
export class GgufError extends VigilError {
  constructor(message: string) {
    super(INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_GGUF, message);
  }
}

/** node-llama-cpp could not load the model or start. */
export class ModelLoadError extends VigilError {
  constructor(message: string) {
    super(INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_LOAD, message);
  }
}

/**
 * An error answered with an HTTP status and an OpenAI-shaped body (VIGIL_ERR_INFERENCE_REQUEST).
 * `openaiCode` is what the body says (null for many errors, as OpenAI); `wireCode` is it, else
 * the `type`: what the access log says.
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
    super(INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_REQUEST, message);
    this.openaiCode = code;
  }

  get wireCode(): string {
    return this.openaiCode ?? this.type;
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
      INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_BUSY,
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
      INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_CONTEXT_LENGTH,
      `This model's context is ${contextSize} tokens per request, but the messages take ${promptTokens} tokens. Shorten the messages.`,
    );
  }
}

const END_CODES = {
  timeout: 'VIGIL_ERR_INFERENCE_TIMEOUT',
  shutdown: 'VIGIL_ERR_INFERENCE_SHUTTING_DOWN',
  client: 'VIGIL_ERR_INFERENCE_CLIENT_CLOSED',
} as const satisfies Record<string, Code>;

/** Why a completion ended early: each becomes a clear error, never an empty reply. */
export class EndReason extends VigilError {
  constructor(
    readonly kind: 'timeout' | 'shutdown' | 'client',
    message: string,
  ) {
    super(INFERENCE_ERRORS[END_CODES[kind]], message);
  }
}

/** The grammar worker exited while it built a grammar (HTTP 500); the next job gets a new worker. */
export class GrammarWorkerError extends VigilError {
  constructor() {
    super(INFERENCE_ERRORS.VIGIL_ERR_INFERENCE_GRAMMAR_WORKER, 'the grammar worker exited');
  }
}

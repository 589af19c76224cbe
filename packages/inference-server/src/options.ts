/**
 * `inference-server serve`'s options, declared once: the command line, the environment
 * (INFERENCE_SERVER_<FLAG>), `--help`, the defaults of `start()` and the stack's argv all come from
 * INFERENCE_SERVE_OPTIONS. The tools' own options are in cli-options.ts.
 */
import {
  defineOptions,
  INFERENCE_HTTP,
  intFlag,
  listenOption,
  millisOption,
  type OptionSpecs,
  type OptionsOf,
  SERVICE_LOG_LEVELS,
  secondsFlag,
} from '@vigil/shared-types/light';
import { DEFAULT_INPUT_LIMITS } from './limits.js';

export type GpuChoice = 'auto' | 'off' | 'metal' | 'cuda' | 'vulkan';
export const GPU_CHOICES: readonly GpuChoice[] = ['auto', 'off', 'metal', 'cuda', 'vulkan'];
export type WorkerSched = 'idle' | 'normal';
export const WORKER_SCHEDS: readonly WorkerSched[] = ['idle', 'normal'];

/** The model, its listeners and its work. */
const SERVING = {
  model: { short: '-m', arg: '<file>', help: 'the GGUF model file', required: true },
  'model-id': {
    arg: '<id>',
    key: 'modelIds',
    help: 'an id the model is listed and requested as (repeatable)',
    repeatable: true,
    defaultHelp: 'the file name',
  },
  http: { arg: '<addr>', help: 'plain HTTP listener HOST:PORT, or off', ...listenOption, default: INFERENCE_HTTP },
  mtls: {
    arg: '<addr>',
    help: 'mutual-TLS listener HOST:PORT, or off',
    ...listenOption,
    defaultHelp: '127.0.0.1:1338 when the TLS files are given',
  },
  'tls-cert': { arg: '<file>', help: 'server certificate (PEM) for --mtls' },
  'tls-key': { arg: '<file>', help: 'server private key (PEM) for --mtls' },
  'tls-ca': { arg: '<file>', help: 'CA (PEM) that client certificates must be signed by' },
  gpu: { arg: '<kind>', help: 'compute backend', choices: GPU_CHOICES, default: 'auto' },
  threads: {
    arg: '<n>',
    help: 'CPU threads for light work: one completion of a small model',
    parse: intFlag(1),
    defaultHelp: 'the physical cores, one fewer than the CPUs, at most 32',
  },
  'batch-threads': {
    arg: '<n>',
    help: 'CPU threads for a batch whose tokens x model size reach 512 MiB (a prompt; several completions)',
    parse: intFlag(1),
    defaultHelp: '--threads if given, else every physical core',
  },
  parallel: {
    arg: '<n>',
    help: 'completions generated at the same time (context sequences)',
    parse: intFlag(1),
    default: 2,
  },
  'state-cache-mib': {
    arg: '<n>',
    help: 'bound of the saved states of conversations evicted from their slot, MiB; 0: off',
    parse: intFlag(0),
    default: 1024,
  },
  'state-cache-dir': {
    arg: '<dir>',
    help: 'where saved states are written',
    defaultHelp: '/dev/shm if present, else the temp dir',
  },
  'context-size': {
    arg: '<n>',
    help: 'tokens per sequence',
    parse: intFlag(16),
    defaultHelp: "the model's, at most 4096",
  },
  'max-queue': {
    arg: '<n>',
    help: 'requests that may wait for a sequence; more get 429',
    parse: intFlag(0),
    default: 16,
  },
  'request-timeout': {
    arg: '<s>',
    key: 'requestTimeoutMs',
    help: 'a completion (waiting included) that takes longer ends with a timeout error',
    ...millisOption(0.001),
    default: 120_000,
  },
  'shutdown-grace': {
    arg: '<s>',
    key: 'shutdownGraceMs',
    help: 'on SIGTERM, how long in-flight completions may take before they are aborted',
    ...millisOption(0),
    default: 10_000,
  },
} as const satisfies OptionSpecs;

/** Its files, who may call it, the limits of one request, and the log. */
const REQUESTS = {
  manifest: { arg: '<file>', help: 'verify the model against this sha256 manifest before loading' },
  'manifest-key': { arg: '<file>', help: "verify the manifest's ed25519 signature with this public key (PEM)" },
  'access-log': { arg: '<file>', help: 'append one JSON line per request here' },
  'max-body-bytes': { arg: '<n>', help: 'largest request body', parse: intFlag(1024), default: 4 * 1024 * 1024 },
  'worker-sched': {
    arg: '<policy>',
    help: "Linux: the generation threads' policy (idle: they take only CPU nothing else wants, so HTTP never waits for them, and wait while other work holds every core; normal: they share the CPUs)",
    choices: WORKER_SCHEDS,
    default: 'idle',
  },
  'worker-nice': {
    arg: '<n>',
    help: 'Linux: nice value for the generation threads under --worker-sched normal (1-19; 0: off)',
    parse: intFlag(0),
    default: 0,
  },
  'strict-tools': {
    help: 'answer 400 to hosted tools this server cannot run (web_search, …) instead of leaving them out',
  },
  'allow-non-loopback': { help: 'allow the plain HTTP listener on an address that is not loopback' },
  'allow-origin': {
    arg: '<origin>',
    key: 'allowOrigins',
    help: 'a web origin (scheme://host[:port]) whose pages may call the API (repeatable; requests with another Origin get 403)',
    repeatable: true,
    defaultHelp: 'none',
  },
  'api-key-file': {
    arg: '<file>',
    help: 'require "Authorization: Bearer KEY" (KEY: the first line of this file) on the plain listener, but for /health',
  },
  'max-n': { arg: '<n>', help: 'most choices (n) one completion request may ask for', parse: intFlag(1), default: 4 },
  'grammar-timeout': {
    arg: '<s>',
    key: 'grammarTimeoutMs',
    help: 'a JSON-schema or tools grammar not built within this is refused (400)',
    ...millisOption(0.001),
    default: 2_000,
  },
  'grammar-memory': {
    arg: '<MiB>',
    key: 'grammarMemoryMb',
    help: 'heap of the grammar worker; a grammar that needs more is refused (400)',
    parse: intFlag(16),
    default: 256,
  },
  'max-schema-branches': {
    arg: '<n>',
    help: 'anyOf/oneOf alternatives a schema may have once its $refs are expanded',
    parse: intFlag(1),
    default: DEFAULT_INPUT_LIMITS.maxSchemaBranches,
  },
  'max-schema-bytes': {
    arg: '<n>',
    help: "bytes of one JSON schema (response_format, or one tool's parameters)",
    parse: intFlag(1),
    default: DEFAULT_INPUT_LIMITS.maxSchemaBytes,
  },
  'max-enum-values': {
    arg: '<n>',
    help: 'enum values a schema may have, all its enums together',
    parse: intFlag(1),
    default: DEFAULT_INPUT_LIMITS.maxEnumValues,
  },
  'sse-keepalive': {
    arg: '<s>',
    key: 'sseKeepAliveMs',
    help: 'a stream silent this long (a long prompt) gets an SSE comment; 0: never',
    ...millisOption(0),
    default: 5_000,
  },
  'stall-after': {
    arg: '<s>',
    key: 'stallAfterMs',
    help: 'a sequence generating with no new token this long is stalled: /health 503, no watchdog',
    ...millisOption(0.1),
    default: 10_000,
  },
  'min-prompt-rate': {
    arg: '<tokens/s>',
    help: 'while a prompt is evaluated the stall bound grows by its tokens at this rate',
    parse: secondsFlag(0.001, 'expected a number of at least 0.001'),
    default: 10,
  },
  'log-level': { arg: '<level>', help: 'error, warn, info or debug', choices: SERVICE_LOG_LEVELS, default: 'info' },
  'log-file': { arg: '<file>', help: 'append the JSON log here', defaultHelp: 'stdout' },
} as const satisfies OptionSpecs;

export const INFERENCE_SERVE_OPTIONS = defineOptions('inference-server', { ...SERVING, ...REQUESTS });

export type ServeFlags = OptionsOf<typeof INFERENCE_SERVE_OPTIONS>;

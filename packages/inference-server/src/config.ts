import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { basename } from 'node:path';
import { type HostPort, INFERENCE_HTTP, INFERENCE_MTLS, isLoopbackHost } from '@vigil/shared-types';
import { canonicalOrigin } from './browser.js';
import { ConfigError } from './errors.js';
import { DEFAULT_INPUT_LIMITS, type InputLimits } from './limits.js';
import type { Logger } from './logger.js';
import { defaultStateDir } from './state-cache.js';

export type GpuChoice = 'auto' | 'off' | 'metal' | 'cuda' | 'vulkan';
export const GPU_CHOICES: readonly GpuChoice[] = ['auto', 'off', 'metal', 'cuda', 'vulkan'];

export interface ServerConfig {
  /** The GGUF model file. */
  readonly model: string;
  /** The ids `/v1/models` lists and requests may name; the first is the main one. */
  readonly modelIds: readonly string[];
  /** Plain HTTP listener; null: off. */
  readonly http: HostPort | null;
  /** Mutual-TLS listener; null: off. */
  readonly mtls: HostPort | null;
  readonly tlsCert: string | null;
  readonly tlsKey: string | null;
  readonly tlsCa: string | null;
  readonly gpu: GpuChoice;
  /** CPU threads for evaluation while one completion runs. */
  readonly threads: number;
  /** CPU threads while several completions run at once. */
  readonly batchThreads: number;
  /** Context sequences: completions generated at the same time. */
  readonly parallel: number;
  /** Tokens per sequence (prompt and completion). */
  readonly contextSize: number | null;
  /** Requests that may wait for a free sequence; more are refused with 429. */
  readonly maxQueue: number;
  /** A completion (queueing included) that takes longer is ended with a timeout error. */
  readonly requestTimeoutMs: number;
  /** On SIGTERM, how long in-flight completions may take before they are aborted. */
  readonly shutdownGraceMs: number;
  readonly manifest: string | null;
  readonly manifestKey: string | null;
  /** Access log (JSON lines, appended); null: none. */
  readonly accessLog: string | null;
  readonly maxBodyBytes: number;
  readonly allowNonLoopback: boolean;
  /** Web origins (`scheme://host[:port]`) whose pages may call the API; requests from others get 403. */
  readonly allowOrigins: readonly string[];
  /** The key plain-listener clients must send as `Authorization: Bearer`; null: none asked. */
  readonly apiKey: string | null;
  /** The file it was read from. */
  readonly apiKeyFile: string | null;
  /** Most choices (`n`) one request may ask for. */
  readonly maxN: number;
  /** Hosted tools the server cannot run (web_search, …) are a 400 instead of being left out. */
  readonly strictTools: boolean;
  /** A stream that has sent nothing this long gets an SSE comment (`: keep-alive`); 0: never. */
  readonly sseKeepAliveMs: number;
  /** Bound of the saved-state cache (states of conversations evicted from their slot), MiB; 0: off. */
  readonly stateCacheMib: number;
  /** Where saved states are written (a private directory is made in it). */
  readonly stateCacheDir: string;
  /** A slot generating with no new token this long is stalled (/health 503, no watchdog). */
  readonly stallAfterMs: number;
  /** While a prompt is evaluated the bound grows by its tokens at this rate (tokens/s). */
  readonly minPromptRate: number;
  /** Nice value for every thread but the event loop's (Linux; 0: leave them be). */
  readonly workerNice: number;
  /** Stop strings, schemas, tools: what one request may ask to be built (limits.ts). */
  readonly inputLimits: InputLimits;
  /** A grammar (JSON schema, tools) not built within this is refused: 400 "schema too complex". */
  readonly grammarTimeoutMs: number;
  /** Heap of the grammar worker (MiB); a grammar that needs more is refused the same way. */
  readonly grammarMemoryMb: number;
  /** Bytes of grammar text the compiled-grammar cache keeps. */
  readonly grammarCacheBytes: number;
  /** Unix seconds shown as `created` in the model list. */
  readonly createdAt: number;
  readonly logger: Logger;
}

export type ServerOptions = Partial<Omit<ServerConfig, 'model' | 'logger' | 'apiKey' | 'inputLimits'>> & {
  readonly model: string;
  /** Any limit not given keeps its default. */
  readonly inputLimits?: Partial<InputLimits>;
  readonly logger?: Logger;
};

export const DEFAULTS = {
  http: INFERENCE_HTTP,
  mtls: INFERENCE_MTLS,
  gpu: 'auto' as GpuChoice,
  parallel: 2,
  maxQueue: 16,
  requestTimeoutMs: 120_000,
  shutdownGraceMs: 10_000,
  maxBodyBytes: 4 * 1024 * 1024,
  workerNice: 0,
  maxN: 4,
  sseKeepAliveMs: 5_000,
  stateCacheMib: 1024,
  grammarTimeoutMs: 2_000,
  grammarMemoryMb: 256,
  grammarCacheBytes: 16 * 1024 * 1024,
  stallAfterMs: 10_000,
  minPromptRate: 10,
  /** Per-sequence context when the model's own is larger. */
  maxDefaultContextSize: 4096,
} as const;

/** Physical CPU cores (Linux: distinct package/core ids in sysfs), else the logical count. */
export function physicalCores(): number {
  const logical = availableParallelism();
  try {
    const base = '/sys/devices/system/cpu';
    const ids = new Set<string>();
    for (const d of readdirSync(base)) {
      if (!/^cpu\d+$/.test(d)) continue;
      const t = `${base}/${d}/topology`;
      if (!existsSync(`${t}/core_id`)) continue;
      const pkg = readFileSync(`${t}/physical_package_id`, 'utf8').trim();
      ids.add(`${pkg}:${readFileSync(`${t}/core_id`, 'utf8').trim()}`);
    }
    if (ids.size > 0) return Math.min(ids.size, logical);
  } catch {
    // not Linux, or no sysfs: fall through
  }
  return Math.max(1, Math.min(logical, cpus().length || logical));
}

/**
 * Evaluation threads that are fast on this host: the physical cores, but one fewer than the
 * logical CPUs so that the event loop (HTTP, the model list) always has a core; at least 1,
 * at most 32. llama.cpp's threads spin while they wait for each other: on a 2-CPU host two
 * threads are 3-50× slower than one (measured), and node-llama-cpp's own default (4) worse.
 */
export function defaultThreads(): number {
  return Math.max(1, Math.min(physicalCores(), availableParallelism() - 1, 32));
}

/** The model id used when none is configured: the file name without `.gguf`. */
export function defaultModelId(model: string): string {
  return basename(model).replace(/\.gguf$/i, '') || 'model';
}

/**
 * The API key in `file`: its first line, without surrounding whitespace. A missing, unreadable or
 * empty file is a configuration error (a server meant to require a key never serves without).
 */
export function readApiKey(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`--api-key-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const key = (text.split(/\r?\n/)[0] ?? '').trim();
  if (key === '') throw new ConfigError(`--api-key-file ${file}: the file is empty (one line: the key)`);
  if (/\s/.test(key)) throw new ConfigError(`--api-key-file ${file}: the key must not contain spaces`);
  return key;
}

/** The input limits: the defaults, with these; each a positive integer. */
function resolveInputLimits(given: Partial<InputLimits>): InputLimits {
  const out: Record<string, number> = { ...DEFAULT_INPUT_LIMITS };
  for (const [k, v] of Object.entries(given)) {
    if (v === undefined) continue;
    if (!(k in out) || !Number.isInteger(v) || v < 1) throw new ConfigError(`${k} must be an integer of at least 1`);
    out[k] = v;
  }
  return out as unknown as InputLimits;
}

/** Fills defaults and checks the configuration; throws ConfigError with a one-line reason. */
export function resolveConfig(options: ServerOptions, logger: Logger): ServerConfig {
  if (!options.model) throw new ConfigError('no model: give --model FILE (a GGUF file; `make-model` writes one)');
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(options.model);
  } catch {
    throw new ConfigError(`model file not found: ${options.model}`);
  }
  if (!st.isFile()) throw new ConfigError(`model is not a file: ${options.model}`);
  const ids = (options.modelIds ?? []).map((s) => s.trim()).filter((s) => s !== '');
  const modelIds = ids.length > 0 ? [...new Set(ids)] : [defaultModelId(options.model)];
  const tlsCert = options.tlsCert ?? null;
  const tlsKey = options.tlsKey ?? null;
  const tlsCa = options.tlsCa ?? null;
  const anyTls = tlsCert !== null || tlsKey !== null || tlsCa !== null;
  // --mtls not given: on at the default address when the TLS files are given, else off.
  const mtls = options.mtls === undefined ? (anyTls ? DEFAULTS.mtls : null) : options.mtls;
  if (mtls) {
    const missing = [
      tlsCert === null && '--tls-cert',
      tlsKey === null && '--tls-key',
      tlsCa === null && '--tls-ca',
    ].filter(Boolean);
    if (missing.length > 0) throw new ConfigError(`the mTLS listener needs ${missing.join(', ')}`);
    for (const f of [tlsCert, tlsKey, tlsCa] as string[]) {
      if (!existsSync(f)) throw new ConfigError(`TLS file not found: ${f}`);
    }
  }
  const http = options.http === undefined ? DEFAULTS.http : options.http;
  if (!http && !mtls) throw new ConfigError('both listeners are off: give --http or --mtls');
  const allowNonLoopback = options.allowNonLoopback === true;
  if (http && !isLoopbackHost(http.host) && !allowNonLoopback) {
    throw new ConfigError(
      `refusing to serve plain HTTP on ${http.host}, which is not loopback: use --allow-non-loopback, or the mTLS listener`,
    );
  }
  const allowOrigins = (options.allowOrigins ?? []).map((o) => {
    const c = canonicalOrigin(o);
    if (c === null) throw new ConfigError(`--allow-origin ${o}: expected an origin such as http://localhost:3000`);
    return c;
  });
  const positive = (name: string, v: number | null | undefined, min: number, def: number): number => {
    const n = v ?? def;
    if (!Number.isInteger(n) || n < min) throw new ConfigError(`${name} must be an integer of at least ${min}`);
    return n;
  };
  const config: ServerConfig = {
    model: options.model,
    modelIds,
    http,
    mtls,
    tlsCert,
    tlsKey,
    tlsCa,
    gpu: options.gpu ?? DEFAULTS.gpu,
    threads: positive('threads', options.threads, 1, defaultThreads()),
    // Given --threads alone: that many for every load. Neither: all physical cores for batches.
    batchThreads: positive(
      'batch-threads',
      options.batchThreads,
      1,
      options.threads ?? Math.max(defaultThreads(), physicalCores()),
    ),
    parallel: positive('parallel', options.parallel, 1, DEFAULTS.parallel),
    contextSize: options.contextSize ? positive('context-size', options.contextSize, 16, 0) : null,
    maxQueue: positive('max-queue', options.maxQueue, 0, DEFAULTS.maxQueue),
    requestTimeoutMs: positive('request-timeout', options.requestTimeoutMs, 1, DEFAULTS.requestTimeoutMs),
    shutdownGraceMs: positive('shutdown-grace', options.shutdownGraceMs, 0, DEFAULTS.shutdownGraceMs),
    manifest: options.manifest ?? null,
    manifestKey: options.manifestKey ?? null,
    accessLog: options.accessLog ?? null,
    maxBodyBytes: positive('max-body-bytes', options.maxBodyBytes, 1024, DEFAULTS.maxBodyBytes),
    allowNonLoopback,
    allowOrigins: [...new Set(allowOrigins)],
    workerNice: positive('worker-nice', options.workerNice, 0, DEFAULTS.workerNice),
    stateCacheMib: positive('state-cache-mib', options.stateCacheMib, 0, DEFAULTS.stateCacheMib),
    stateCacheDir: options.stateCacheDir ?? defaultStateDir(),
    apiKeyFile: options.apiKeyFile ?? null,
    apiKey: options.apiKeyFile ? readApiKey(options.apiKeyFile) : null,
    maxN: positive('max-n', options.maxN, 1, DEFAULTS.maxN),
    strictTools: options.strictTools === true,
    sseKeepAliveMs: positive('sse-keepalive', options.sseKeepAliveMs, 0, DEFAULTS.sseKeepAliveMs),
    inputLimits: resolveInputLimits(options.inputLimits ?? {}),
    grammarTimeoutMs: positive('grammar-timeout', options.grammarTimeoutMs, 1, DEFAULTS.grammarTimeoutMs),
    grammarMemoryMb: positive('grammar-memory', options.grammarMemoryMb, 16, DEFAULTS.grammarMemoryMb),
    grammarCacheBytes: positive('grammar-cache-bytes', options.grammarCacheBytes, 0, DEFAULTS.grammarCacheBytes),
    stallAfterMs: positive('stall-after', options.stallAfterMs, 100, DEFAULTS.stallAfterMs),
    minPromptRate: positive('min-prompt-rate', options.minPromptRate, 0.001, DEFAULTS.minPromptRate),
    createdAt: options.createdAt ?? Math.floor(st.mtimeMs / 1000),
    logger,
  };
  if (!GPU_CHOICES.includes(config.gpu)) throw new ConfigError(`unknown --gpu ${config.gpu}`);
  if (config.manifestKey && !config.manifest) throw new ConfigError('--manifest-key needs --manifest');
  if (config.manifest && !existsSync(config.manifest)) throw new ConfigError(`manifest not found: ${config.manifest}`);
  if (config.manifestKey && !existsSync(config.manifestKey)) {
    throw new ConfigError(`manifest key not found: ${config.manifestKey}`);
  }
  return config;
}

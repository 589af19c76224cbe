import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { basename } from 'node:path';
import { type HostPort, INFERENCE_MTLS, isLoopbackHost } from '@vigil/shared-types';
import { defaultsOf, optionProblem } from '@vigil/shared-types/light';
import { canonicalOrigin } from './browser.js';
import { ConfigError } from './errors.js';
import { DEFAULT_INPUT_LIMITS, type InputLimits } from './limits.js';
import type { Logger } from './logger.js';
import { GPU_CHOICES, type GpuChoice, INFERENCE_SERVE_OPTIONS, type ServeFlags, type WorkerSched } from './options.js';
import { defaultStateDir } from './state-cache.js';

export { GPU_CHOICES, type GpuChoice } from './options.js';

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
  /** Policy of the threads that run the model (Linux; worker-priority.ts). */
  readonly workerSched: WorkerSched;
  /** Nice value for the threads that run the model (Linux; 0: leave them be). */
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

/** The defaults: the flags' own (INFERENCE_SERVE_OPTIONS), and those of what is no flag. */
export const DEFAULTS = {
  ...defaultsOf(INFERENCE_SERVE_OPTIONS),
  mtls: INFERENCE_MTLS,
  grammarCacheBytes: 16 * 1024 * 1024,
  /** Per-sequence context when the model's own is larger. */
  maxDefaultContextSize: 4096,
} as Required<
  Pick<
    ServeFlags,
    | 'http'
    | 'gpu'
    | 'parallel'
    | 'maxQueue'
    | 'requestTimeoutMs'
    | 'shutdownGraceMs'
    | 'maxBodyBytes'
    | 'workerNice'
    | 'workerSched'
    | 'maxN'
    | 'sseKeepAliveMs'
    | 'stateCacheMib'
    | 'grammarTimeoutMs'
    | 'grammarMemoryMb'
    | 'stallAfterMs'
    | 'minPromptRate'
  >
> & {
  readonly mtls: HostPort;
  readonly grammarCacheBytes: number;
  readonly maxDefaultContextSize: number;
};

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

/** `serve`'s typed flags → the options of `start()`. */
export function serverOptionsFromFlags(flags: ServeFlags, logger: Logger): ServerOptions {
  const { logLevel: _level, logFile: _file, maxSchemaBranches, maxEnumValues, maxSchemaBytes, ...rest } = flags;
  return { ...rest, inputLimits: { maxSchemaBranches, maxEnumValues, maxSchemaBytes }, logger };
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
  // Values given in-process are checked as the flags are (the tables' parsers).
  const problem = optionProblem(INFERENCE_SERVE_OPTIONS, { ...options, ...options.inputLimits });
  if (problem) throw new ConfigError(`invalid ${problem}`);
  const grammarCacheBytes = options.grammarCacheBytes ?? DEFAULTS.grammarCacheBytes;
  if (!Number.isInteger(grammarCacheBytes) || grammarCacheBytes < 0) {
    throw new ConfigError('grammar-cache-bytes must be an integer of at least 0');
  }
  const config: ServerConfig = {
    model: options.model,
    modelIds,
    http,
    mtls,
    tlsCert,
    tlsKey,
    tlsCa,
    gpu: options.gpu ?? DEFAULTS.gpu,
    threads: options.threads ?? defaultThreads(),
    // Given --threads alone: that many for every load. Neither: all physical cores for batches.
    batchThreads: options.batchThreads ?? options.threads ?? Math.max(defaultThreads(), physicalCores()),
    parallel: options.parallel ?? DEFAULTS.parallel,
    contextSize: options.contextSize || null,
    maxQueue: options.maxQueue ?? DEFAULTS.maxQueue,
    requestTimeoutMs: options.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs,
    shutdownGraceMs: options.shutdownGraceMs ?? DEFAULTS.shutdownGraceMs,
    manifest: options.manifest ?? null,
    manifestKey: options.manifestKey ?? null,
    accessLog: options.accessLog ?? null,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULTS.maxBodyBytes,
    allowNonLoopback,
    allowOrigins: [...new Set(allowOrigins)],
    workerNice: options.workerNice ?? DEFAULTS.workerNice,
    workerSched: options.workerSched ?? DEFAULTS.workerSched,
    stateCacheMib: options.stateCacheMib ?? DEFAULTS.stateCacheMib,
    stateCacheDir: options.stateCacheDir ?? defaultStateDir(),
    apiKeyFile: options.apiKeyFile ?? null,
    apiKey: options.apiKeyFile ? readApiKey(options.apiKeyFile) : null,
    maxN: options.maxN ?? DEFAULTS.maxN,
    strictTools: options.strictTools === true,
    sseKeepAliveMs: options.sseKeepAliveMs ?? DEFAULTS.sseKeepAliveMs,
    inputLimits: resolveInputLimits(options.inputLimits ?? {}),
    grammarTimeoutMs: options.grammarTimeoutMs ?? DEFAULTS.grammarTimeoutMs,
    grammarMemoryMb: options.grammarMemoryMb ?? DEFAULTS.grammarMemoryMb,
    grammarCacheBytes,
    stallAfterMs: options.stallAfterMs ?? DEFAULTS.stallAfterMs,
    minPromptRate: options.minPromptRate ?? DEFAULTS.minPromptRate,
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

import { parseListen } from '@vigil/shared-types';
import { collectFlag, envOption } from '@vigil/shared-types/node';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULTS, defaultThreads, GPU_CHOICES, physicalCores } from './config.js';
import { DEFAULT_INPUT_LIMITS } from './limits.js';
import { LOG_LEVELS } from './logger.js';

/** The command-line program's name: its env variables are INFERENCE_SERVER_…. */
export const BIN = 'inference-server';

export const int = (min: number) => (text: string) => {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < min) throw new InvalidArgumentError(`expected an integer of at least ${min}`);
  return n;
};
export const seconds = (min: number) => (text: string) => {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min) {
    throw new InvalidArgumentError(`expected a number of seconds of at least ${min}`);
  }
  return n;
};
export const listenAddr = (text: string) => {
  try {
    return parseListen(text);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};
/** `serve`'s flags are the service's: INFERENCE_SERVER_<FLAG>. The tools' are INFERENCE_SERVER_<COMMAND>_<FLAG>. */
export const opt = (flags: string, description: string, command?: string) =>
  envOption(BIN, new Option(flags, description), command);

/** The flags of `serve`, each with its env variable and default: the model, its listeners and its work. */
export function addServeOptions(cmd: Command): Command {
  return addRequestOptions(
    cmd
      .addOption(opt('-m, --model <file>', 'the GGUF model file').makeOptionMandatory())
      .addOption(
        opt(
          '--model-id <id>',
          'an id the model is listed and requested as (repeatable; default: the file name)',
        ).argParser(collectFlag),
      )
      .addOption(
        opt('--http <addr>', 'plain HTTP listener HOST:PORT, or off')
          .argParser(listenAddr)
          .default(DEFAULTS.http, '127.0.0.1:1337'),
      )
      .addOption(
        opt(
          '--mtls <addr>',
          'mutual-TLS listener HOST:PORT, or off (default: 127.0.0.1:1338 when the TLS files are given)',
        ).argParser(listenAddr),
      )
      .addOption(opt('--tls-cert <file>', 'server certificate (PEM) for --mtls'))
      .addOption(opt('--tls-key <file>', 'server private key (PEM) for --mtls'))
      .addOption(opt('--tls-ca <file>', 'CA (PEM) that client certificates must be signed by'))
      .addOption(opt('--gpu <kind>', 'compute backend').choices(GPU_CHOICES).default(DEFAULTS.gpu))
      .addOption(
        opt(
          '--threads <n>',
          `CPU threads for light work: one completion of a small model (default: ${defaultThreads()} on this host)`,
        ).argParser(int(1)),
      )
      .addOption(
        opt(
          '--batch-threads <n>',
          `CPU threads for a batch whose tokens x model size reach 512 MiB (a prompt; several completions) (default: --threads if given, else ${Math.max(defaultThreads(), physicalCores())} on this host)`,
        ).argParser(int(1)),
      )
      .addOption(
        opt('--parallel <n>', 'completions generated at the same time (context sequences)')
          .argParser(int(1))
          .default(DEFAULTS.parallel),
      )
      .addOption(
        opt('--state-cache-mib <n>', 'bound of the saved states of conversations evicted from their slot, MiB; 0: off')
          .argParser(int(0))
          .default(DEFAULTS.stateCacheMib),
      )
      .addOption(
        opt(
          '--state-cache-dir <dir>',
          'where saved states are written (default: /dev/shm if present, else the temp dir)',
        ),
      )
      .addOption(
        opt('--context-size <n>', "tokens per sequence (default: the model's, at most 4096)").argParser(int(16)),
      )
      .addOption(
        opt('--max-queue <n>', 'requests that may wait for a sequence; more get 429')
          .argParser(int(0))
          .default(DEFAULTS.maxQueue),
      )
      .addOption(
        opt('--request-timeout <s>', 'a completion (waiting included) that takes longer ends with a timeout error')
          .argParser(seconds(0.001))
          .default(DEFAULTS.requestTimeoutMs / 1000),
      )
      .addOption(
        opt('--shutdown-grace <s>', 'on SIGTERM, how long in-flight completions may take before they are aborted')
          .argParser(seconds(0))
          .default(DEFAULTS.shutdownGraceMs / 1000),
      ),
  );
}

/** The flags of `serve` for its files, who may call it, the limits of one request, and the log. */
function addRequestOptions(cmd: Command): Command {
  return cmd
    .addOption(opt('--manifest <file>', 'verify the model against this sha256 manifest before loading'))
    .addOption(opt('--manifest-key <file>', "verify the manifest's ed25519 signature with this public key (PEM)"))
    .addOption(opt('--access-log <file>', 'append one JSON line per request here'))
    .addOption(opt('--max-body-bytes <n>', 'largest request body').argParser(int(1024)).default(DEFAULTS.maxBodyBytes))
    .addOption(
      opt(
        '--worker-nice <n>',
        'Linux: nice value for the generation threads (1-19: HTTP never waits for them, at some cost in batch throughput; 0: off)',
      )
        .argParser(int(0))
        .default(DEFAULTS.workerNice),
    )
    .addOption(
      opt(
        '--strict-tools',
        'answer 400 to hosted tools this server cannot run (web_search, …) instead of leaving them out',
      ),
    )
    .addOption(opt('--allow-non-loopback', 'allow the plain HTTP listener on an address that is not loopback'))
    .addOption(
      opt(
        '--allow-origin <origin>',
        'a web origin (scheme://host[:port]) whose pages may call the API (repeatable; default: none, requests with another Origin get 403)',
      ).argParser(collectFlag),
    )
    .addOption(
      opt(
        '--api-key-file <file>',
        'require "Authorization: Bearer KEY" (KEY: the first line of this file) on the plain listener, but for /health',
      ),
    )
    .addOption(
      opt('--max-n <n>', 'most choices (n) one completion request may ask for')
        .argParser(int(1))
        .default(DEFAULTS.maxN),
    )
    .addOption(
      opt('--grammar-timeout <s>', 'a JSON-schema or tools grammar not built within this is refused (400)')
        .argParser(seconds(0.001))
        .default(DEFAULTS.grammarTimeoutMs / 1000),
    )
    .addOption(
      opt('--grammar-memory <MiB>', 'heap of the grammar worker; a grammar that needs more is refused (400)')
        .argParser(int(16))
        .default(DEFAULTS.grammarMemoryMb),
    )
    .addOption(
      opt('--max-schema-branches <n>', 'anyOf/oneOf alternatives a schema may have once its $refs are expanded')
        .argParser(int(1))
        .default(DEFAULT_INPUT_LIMITS.maxSchemaBranches),
    )
    .addOption(
      opt('--max-schema-bytes <n>', "bytes of one JSON schema (response_format, or one tool's parameters)")
        .argParser(int(1))
        .default(DEFAULT_INPUT_LIMITS.maxSchemaBytes),
    )
    .addOption(
      opt('--max-enum-values <n>', 'enum values a schema may have, all its enums together')
        .argParser(int(1))
        .default(DEFAULT_INPUT_LIMITS.maxEnumValues),
    )
    .addOption(
      opt('--sse-keepalive <s>', 'a stream silent this long (a long prompt) gets an SSE comment; 0: never')
        .argParser(seconds(0))
        .default(DEFAULTS.sseKeepAliveMs / 1000),
    )
    .addOption(
      opt('--stall-after <s>', 'a sequence generating with no new token this long is stalled: /health 503, no watchdog')
        .argParser(seconds(0.1))
        .default(DEFAULTS.stallAfterMs / 1000),
    )
    .addOption(
      opt(
        '--min-prompt-rate <tokens/s>',
        'while a prompt is evaluated the stall bound grows by its tokens at this rate',
      )
        .argParser(seconds(0.001))
        .default(DEFAULTS.minPromptRate),
    )
    .addOption(opt('--log-level <level>', 'error, warn, info or debug').choices(LOG_LEVELS).default('info'))
    .addOption(opt('--log-file <file>', 'append the JSON log here instead of stdout'));
}

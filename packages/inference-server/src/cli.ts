import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, ExitCode, envVarFor, type HostPort, parseListen, splitList } from '@vigil/shared-types';
import {
  ensureDir,
  PRIVATE_DIR,
  PRIVATE_FILE,
  runCli,
  serviceNotifier,
  stopOnSignals,
  writeFileAtomic,
} from '@vigil/shared-types/node';
import { Command, InvalidArgumentError, Option } from 'commander';
import { generateCerts } from './certs.js';
import { DEFAULTS, defaultThreads, GPU_CHOICES, type GpuChoice, physicalCores } from './config.js';
import { ConfigError } from './errors.js';
import {
  makeModel,
  PRESET_NAMES,
  PRESETS,
  type PresetName,
  parameterCount,
  WEIGHT_TYPES,
  type WeightType,
} from './gguf/index.js';
import { DEFAULT_INPUT_LIMITS } from './limits.js';
import { createLogger, LOG_LEVELS, type Logger, type LogLevel } from './logger.js';
import { createManifest, generateSigningKey, writeManifest } from './manifest.js';
import { type ServerHandle, start } from './server.js';
import { VERSION } from './version.js';

const BIN = 'inference-server';

const int = (min: number) => (text: string) => {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < min) throw new InvalidArgumentError(`expected an integer of at least ${min}`);
  return n;
};
const seconds = (min: number) => (text: string) => {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < min) {
    throw new InvalidArgumentError(`expected a number of seconds of at least ${min}`);
  }
  return n;
};
const listenAddr = (text: string) => {
  try {
    return parseListen(text);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};
const collect = (v: string, prev: string[] | undefined) => [...(prev ?? []), v];
/** A repeatable flag: its values; from the environment, one string split on commas and whitespace. */
const list = (cmd: Command, name: string): string[] => {
  const v: unknown = cmd.getOptionValue(name);
  const values = typeof v === 'string' ? [v] : Array.isArray(v) ? (v as string[]) : [];
  return cmd.getOptionValueSource(name) === 'env' ? values.flatMap(splitList) : values;
};

/** `serve`'s flags are the service's: INFERENCE_SERVER_<FLAG>. The tools' are INFERENCE_SERVER_<COMMAND>_<FLAG>. */
const opt = (flags: string, description: string, command?: string) => {
  const o = new Option(flags, description);
  return o.env(envVarFor(BIN, command ? `${command}-${o.long ?? flags}` : (o.long ?? flags)));
};

/** A start-up failure of `serve`: in the log too (the CLI prints it on stderr), then it ends the command. */
async function failServe(err: unknown, logger: Logger): Promise<never> {
  logger.error(describeError(err), { code: (err as { code?: unknown })?.code ?? null });
  await logger.close?.();
  throw err;
}

/**
 * A fault outside any request (a request's own is answered by its last resort, last-resort.ts):
 * the state of the process is unknown, so it logs one clear line, says it on stderr too (the log
 * may be a file) and exits 1 for its supervisor to restart it.
 */
function exitOnFatal(logger: Logger): void {
  const fatal = (kind: string) => (err: unknown) => {
    const text = (err instanceof Error ? (err.stack ?? err.message) : String(err)).split('\n').slice(0, 4).join(' | ');
    try {
      logger.error(`fatal ${kind}: exiting`, { error: text });
    } catch {
      // the logger itself failed; stderr below still says it
    }
    process.stderr.write(`${BIN}: fatal ${kind}, exiting: ${text}\n`);
    process.exit(ExitCode.FAILURE);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled rejection'));
}

const program = new Command(BIN)
  .description(
    'Serve a local GGUF language model over an OpenAI-style HTTP API and mutual TLS; write models, certificates and manifests.',
  )
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .exitOverride()
  .showHelpAfterError(false)
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

program
  .command('serve')
  .description('serve the model on HTTP (default 127.0.0.1:1337) and, with certificates, mutual TLS (:1338)')
  .addOption(opt('-m, --model <file>', 'the GGUF model file').makeOptionMandatory())
  .addOption(
    opt('--model-id <id>', 'an id the model is listed and requested as (repeatable; default: the file name)').argParser(
      collect,
    ),
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
    opt('--state-cache-dir <dir>', 'where saved states are written (default: /dev/shm if present, else the temp dir)'),
  )
  .addOption(opt('--context-size <n>', "tokens per sequence (default: the model's, at most 4096)").argParser(int(16)))
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
  )
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
    ).argParser(collect),
  )
  .addOption(
    opt(
      '--api-key-file <file>',
      'require "Authorization: Bearer KEY" (KEY: the first line of this file) on the plain listener, but for /health',
    ),
  )
  .addOption(
    opt('--max-n <n>', 'most choices (n) one completion request may ask for').argParser(int(1)).default(DEFAULTS.maxN),
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
    opt('--min-prompt-rate <tokens/s>', 'while a prompt is evaluated the stall bound grows by its tokens at this rate')
      .argParser(seconds(0.001))
      .default(DEFAULTS.minPromptRate),
  )
  .addOption(opt('--log-level <level>', 'error, warn, info or debug').choices(LOG_LEVELS).default('info'))
  .addOption(opt('--log-file <file>', 'append the JSON log here instead of stdout'))
  .action(async (o, cmd: Command) => {
    const logger = createLogger({ level: o.logLevel as LogLevel, file: o.logFile, service: BIN });
    exitOnFatal(logger);
    const graceMs = Math.round((o.shutdownGrace as number) * 1000);
    let stopping = false;
    let started!: { resolve(s: ServerHandle): void; reject(err: unknown): void };
    const server$ = new Promise<ServerHandle>((resolve, reject) => {
      started = { resolve, reject };
    });
    server$.catch(() => {});
    // systemd's Type=notify (or the dev supervisor): READY=1 once the listeners answer (the model
    // loads behind /health); the watchdog is fed while the event loop turns and no sequence is
    // stalled, and a stall triggers it at once.
    let handle: ServerHandle | null = null;
    const notifier = serviceNotifier({
      healthy: () => handle?.stalled() ?? null,
      trigger: true,
      warn: (m) => logger.warn(m),
    });
    // Handlers first: a signal that comes during start-up is not lost; the server is closed as
    // soon as there is one. SIGTERM/SIGINT: graceful close, exit 0; a second signal: exit 1 now.
    stopOnSignals(
      {
        close: async () => {
          stopping = true;
          // Whatever happens below, the process is gone within the grace + 2 s.
          setTimeout(() => process.exit(ExitCode.FAILURE), graceMs + 1_800).unref();
          await (await server$).close();
        },
      },
      logger,
      notifier,
    );
    let server: ServerHandle;
    try {
      server = await start({
        model: o.model,
        modelIds: list(cmd, 'modelId'),
        http: o.http as HostPort | null,
        ...(o.mtls !== undefined ? { mtls: o.mtls as HostPort | null } : {}),
        tlsCert: o.tlsCert ?? null,
        tlsKey: o.tlsKey ?? null,
        tlsCa: o.tlsCa ?? null,
        gpu: o.gpu as GpuChoice,
        ...(o.threads !== undefined ? { threads: o.threads } : {}),
        ...(o.batchThreads !== undefined ? { batchThreads: o.batchThreads } : {}),
        workerNice: o.workerNice,
        stateCacheMib: o.stateCacheMib,
        ...(o.stateCacheDir !== undefined ? { stateCacheDir: o.stateCacheDir } : {}),
        parallel: o.parallel,
        contextSize: o.contextSize ?? null,
        maxQueue: o.maxQueue,
        requestTimeoutMs: Math.round((o.requestTimeout as number) * 1000),
        shutdownGraceMs: graceMs,
        manifest: o.manifest ?? null,
        manifestKey: o.manifestKey ?? null,
        accessLog: o.accessLog ?? null,
        maxBodyBytes: o.maxBodyBytes,
        allowNonLoopback: o.allowNonLoopback === true,
        allowOrigins: list(cmd, 'allowOrigin'),
        apiKeyFile: o.apiKeyFile ?? null,
        maxN: o.maxN,
        strictTools: o.strictTools === true,
        grammarTimeoutMs: Math.round((o.grammarTimeout as number) * 1000),
        grammarMemoryMb: o.grammarMemory,
        inputLimits: {
          maxSchemaBranches: o.maxSchemaBranches,
          maxEnumValues: o.maxEnumValues,
          maxSchemaBytes: o.maxSchemaBytes,
        },
        sseKeepAliveMs: Math.round((o.sseKeepalive as number) * 1000),
        stallAfterMs: Math.round((o.stallAfter as number) * 1000),
        minPromptRate: o.minPromptRate as number,
        logger,
      });
    } catch (err) {
      started.reject(err);
      if (stopping) return; // the signal's shutdown reports it
      return failServe(err, logger);
    }
    started.resolve(server);
    if (stopping) return;
    handle = server;
    notifier.ready('loading the model');
    try {
      await server.ready;
      notifier.status('serving');
    } catch (err) {
      if (stopping) return; // stopped while loading: the shutdown path exits
      await Promise.race([server.close(0), new Promise((r) => setTimeout(r, 2000).unref())]);
      return failServe(err, logger);
    }
  });

program
  .command('make-model')
  .description('write a GGUF llama model with deterministic pseudo-random weights (same seed, same bytes)')
  .addOption(opt('-o, --out <file>', 'the GGUF file to write', 'make-model').makeOptionMandatory())
  .addOption(
    opt(
      '--preset <name>',
      `model size: ${PRESET_NAMES.map((p) => `${p} (${fmtParams(parameterCount(PRESETS[p]))})`).join(', ')}`,
      'make-model',
    )
      .choices(PRESET_NAMES)
      .default('tiny'),
  )
  .addOption(opt('--seed <n>', 'seed of the pseudo-random weights', 'make-model').argParser(int(0)).default(1))
  .addOption(opt('--type <type>', 'weight type', 'make-model').choices(WEIGHT_TYPES).default('f16'))
  .addOption(opt('--end-answers', 'a model that ends every answer at once (agent smoke tests)', 'make-model'))
  .addOption(opt('--force', 'replace the file if it exists', 'make-model'))
  .action(async (o) => {
    if (existsSync(o.out) && !o.force) throw new ConfigError(`${o.out} exists: use --force to replace it`);
    const progress = progressReporter(`${o.preset} ${o.type}`);
    try {
      const r = await makeModel({
        out: o.out,
        preset: o.preset as PresetName,
        seed: o.seed,
        type: o.type as WeightType,
        endAnswers: o.endAnswers === true,
        onProgress: progress.update,
      });
      process.stdout.write(`${JSON.stringify(r)}\n`);
    } finally {
      progress.done();
    }
  });

program
  .command('certs')
  .description('write a CA, a server certificate (localhost, 127.0.0.1, ::1) and a client certificate for --mtls')
  .addOption(opt('-o, --out <dir>', 'directory for the PEM files (created 0700)', 'certs').makeOptionMandatory())
  .addOption(opt('--days <n>', 'validity in days', 'certs').argParser(int(1)).default(825))
  .addOption(
    opt('--host <name>', 'another name or address for the server certificate (repeatable)', 'certs').argParser(collect),
  )
  .addOption(opt('--client-name <cn>', "the client certificate's common name", 'certs').default('vigil-client'))
  .addOption(opt('--force', 'replace existing files', 'certs'))
  .action(async (o, cmd: Command) => {
    const r = await generateCerts({
      out: o.out,
      days: o.days,
      hosts: list(cmd, 'host'),
      clientName: o.clientName,
      force: o.force === true,
    });
    process.stdout.write(`${JSON.stringify(r.files)}\n`);
  });

program
  .command('manifest')
  .description('write a sha256 manifest of the model (optionally signed with an ed25519 key)')
  .addOption(
    opt('-m, --model <file>', 'model file to list (repeatable)', 'manifest').argParser(collect).makeOptionMandatory(),
  )
  .addOption(opt('-o, --out <file>', 'the manifest to write', 'manifest').makeOptionMandatory())
  .addOption(opt('--sign <keyfile>', 'sign with this ed25519 private key (PEM; see keygen)', 'manifest'))
  .action(async (o, cmd: Command) => {
    const models = list(cmd, 'model');
    for (const m of models) if (!existsSync(m)) throw new ConfigError(`model file not found: ${m}`);
    if (o.sign && !existsSync(o.sign)) throw new ConfigError(`key file not found: ${o.sign}`);
    try {
      const manifest = await createManifest(models, o.sign);
      await writeManifest(o.out, manifest);
      process.stdout.write(`${JSON.stringify({ out: o.out, files: manifest.files, signed: !!manifest.signature })}\n`);
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
  });

program
  .command('keygen')
  .description('write an ed25519 key pair for signing manifests: manifest-key.pem (0600) and manifest-key.pub.pem')
  .addOption(opt('-o, --out <dir>', 'directory for the two PEM files', 'keygen').makeOptionMandatory())
  .addOption(opt('--force', 'replace existing files', 'keygen'))
  .action(async (o) => {
    const priv = join(o.out, 'manifest-key.pem');
    const pub = join(o.out, 'manifest-key.pub.pem');
    if (!o.force && (existsSync(priv) || existsSync(pub))) {
      throw new ConfigError(`${priv} exists: use --force to replace it`);
    }
    ensureDir(o.out, PRIVATE_DIR);
    const k = generateSigningKey();
    writeFileAtomic(priv, k.privateKey, { mode: PRIVATE_FILE });
    writeFileAtomic(pub, k.publicKey, { mode: 0o644 });
    process.stdout.write(`${JSON.stringify({ privateKey: priv, publicKey: pub })}\n`);
  });

function fmtParams(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(1)}B` : n >= 1e6 ? `${Math.round(n / 1e6)}M` : `${Math.round(n / 1e3)}K`;
}

/** A progress bar on a terminal; otherwise a line at every quarter. Silent for small files. */
function progressReporter(label: string): { update: (written: number, total: number) => void; done: () => void } {
  const tty = process.stderr.isTTY === true;
  let lastQuarter = -1;
  let drawn = false;
  const mb = (n: number) => `${(n / 1048576).toFixed(0)} MiB`;
  return {
    update: (written, total) => {
      if (total < 16 * 1048576) return;
      const frac = written / total;
      if (tty) {
        const width = 30;
        const full = Math.round(frac * width);
        process.stderr.write(
          `\r${label} [${'#'.repeat(full)}${' '.repeat(width - full)}] ${(frac * 100).toFixed(0).padStart(3)}% ${mb(written)}/${mb(total)}`,
        );
        drawn = true;
      } else {
        const q = Math.floor(frac * 4);
        if (q !== lastQuarter) {
          lastQuarter = q;
          process.stderr.write(`${label}: ${q * 25}% (${mb(written)} of ${mb(total)})\n`);
        }
      }
    },
    done: () => {
      if (drawn) process.stderr.write('\n');
    },
  };
}

await runCli(BIN, async () => {
  if (process.argv.length <= 2) {
    // Nothing asked: say how to use it, as a usage error.
    process.stderr.write(program.helpInformation());
    process.exitCode = ExitCode.CONFIG;
    return;
  }
  await program.parseAsync(process.argv);
});

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, ExitCode, type HostPort } from '@vigil/shared-types';
import {
  collectFlag,
  ensureDir,
  listFlag,
  PRIVATE_DIR,
  PRIVATE_FILE,
  runCli,
  serviceNotifier,
  stopOnSignals,
  writeFileAtomic,
} from '@vigil/shared-types/node';
import { Command } from 'commander';
import { generateCerts } from './certs.js';
import { addServeOptions, BIN, int, opt } from './cli-options.js';
import type { GpuChoice } from './config.js';
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
import { createLogger, type Logger, type LogLevel } from './logger.js';
import { createManifest, generateSigningKey, writeManifest } from './manifest.js';
import { type ServerHandle, start } from './server.js';
import { VERSION } from './version.js';

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

addServeOptions(
  program
    .command('serve')
    .description('serve the model on HTTP (default 127.0.0.1:1337) and, with certificates, mutual TLS (:1338)'),
).action(async (o, cmd: Command) => {
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
      modelIds: listFlag(cmd, 'modelId'),
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
      allowOrigins: listFlag(cmd, 'allowOrigin'),
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
    opt('--host <name>', 'another name or address for the server certificate (repeatable)', 'certs').argParser(
      collectFlag,
    ),
  )
  .addOption(opt('--client-name <cn>', "the client certificate's common name", 'certs').default('vigil-client'))
  .addOption(opt('--force', 'replace existing files', 'certs'))
  .action(async (o, cmd: Command) => {
    const r = await generateCerts({
      out: o.out,
      days: o.days,
      hosts: listFlag(cmd, 'host'),
      clientName: o.clientName,
      force: o.force === true,
    });
    process.stdout.write(`${JSON.stringify(r.files)}\n`);
  });

program
  .command('manifest')
  .description('write a sha256 manifest of the model (optionally signed with an ed25519 key)')
  .addOption(
    opt('-m, --model <file>', 'model file to list (repeatable)', 'manifest')
      .argParser(collectFlag)
      .makeOptionMandatory(),
  )
  .addOption(opt('-o, --out <file>', 'the manifest to write', 'manifest').makeOptionMandatory())
  .addOption(opt('--sign <keyfile>', 'sign with this ed25519 private key (PEM; see keygen)', 'manifest'))
  .action(async (o, cmd: Command) => {
    const models = listFlag(cmd, 'model');
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

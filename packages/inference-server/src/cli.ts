import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describeError, ExitCode } from '@vigil/shared-types';
import {
  addOptions,
  binProgram,
  ensureDir,
  followLifecycle,
  PRIVATE_DIR,
  PRIVATE_FILE,
  readOptions,
  runCli,
  serviceNotifier,
  stopOnSignals,
  writeFileAtomic,
} from '@vigil/shared-types/node';
import { Command } from 'commander';
import { generateCerts } from './certs.js';
import { BIN, CERTS_OPTIONS, KEYGEN_OPTIONS, MAKE_MODEL_OPTIONS, MANIFEST_OPTIONS } from './cli-options.js';
import { serverOptionsFromFlags } from './config.js';
import { ConfigError } from './errors.js';
import { makeModel } from './gguf/index.js';
import { createLogger, type Logger } from './logger.js';
import { createManifest, generateSigningKey, writeManifest } from './manifest.js';
import { INFERENCE_SERVE_OPTIONS } from './options.js';
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

const program = binProgram(
  new Command(BIN),
  'Serve a local GGUF language model over an OpenAI-style HTTP API and mutual TLS; write models, certificates and manifests.',
  VERSION,
)
  .showHelpAfterError(false)
  .configureOutput({ writeErr: (s) => process.stderr.write(s) });

addOptions(
  program
    .command('serve')
    .description('serve the model on HTTP (default 127.0.0.1:1337) and, with certificates, mutual TLS (:1338)'),
  INFERENCE_SERVE_OPTIONS,
).action(async (_o, cmd: Command) => {
  const o = readOptions(cmd, INFERENCE_SERVE_OPTIONS);
  const logger = createLogger({ level: o.logLevel, file: o.logFile, service: BIN });
  exitOnFatal(logger);
  const graceMs = o.shutdownGraceMs;
  let stopping = false;
  let started!: { resolve(s: ServerHandle): void; reject(err: unknown): void };
  const server$ = new Promise<ServerHandle>((resolve, reject) => {
    started = { resolve, reject };
  });
  server$.catch(() => {});
  // systemd's Type=notify (or the dev supervisor): READY=1 once the listeners answer (the model
  // loads behind /health), then STATUS= follows the lifecycle (serving, stopping); the watchdog is
  // fed while the event loop turns and no sequence is stalled, and a stall triggers it at once.
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
    server = await start({ ...serverOptionsFromFlags(o, logger), onState: followLifecycle(notifier) });
  } catch (err) {
    started.reject(err);
    if (stopping) return; // the signal's shutdown reports it
    return failServe(err, logger);
  }
  started.resolve(server);
  if (stopping) return;
  handle = server;
  if (server.state() === 'loading') notifier.ready('loading the model');
  try {
    await server.ready;
  } catch (err) {
    if (stopping) return; // stopped while loading: the shutdown path exits
    await Promise.race([server.close(0), new Promise((r) => setTimeout(r, 2000).unref())]);
    return failServe(err, logger);
  }
});

addOptions(
  program
    .command('make-model')
    .description('write a GGUF llama model with deterministic pseudo-random weights (same seed, same bytes)'),
  MAKE_MODEL_OPTIONS,
).action(async (_o, cmd: Command) => {
  const o = readOptions(cmd, MAKE_MODEL_OPTIONS);
  if (existsSync(o.out) && !o.force) throw new ConfigError(`${o.out} exists: use --force to replace it`);
  const progress = progressReporter(`${o.preset} ${o.type}`);
  try {
    const r = await makeModel({
      out: o.out,
      preset: o.preset,
      seed: o.seed,
      type: o.type,
      endAnswers: o.endAnswers,
      onProgress: progress.update,
    });
    process.stdout.write(`${JSON.stringify(r)}\n`);
  } finally {
    progress.done();
  }
});

addOptions(
  program
    .command('certs')
    .description('write a CA, a server certificate (localhost, 127.0.0.1, ::1) and a client certificate for --mtls'),
  CERTS_OPTIONS,
).action(async (_o, cmd: Command) => {
  const r = await generateCerts(readOptions(cmd, CERTS_OPTIONS));
  process.stdout.write(`${JSON.stringify(r.files)}\n`);
});

addOptions(
  program
    .command('manifest')
    .description('write a sha256 manifest of the model (optionally signed with an ed25519 key)'),
  MANIFEST_OPTIONS,
).action(async (_o, cmd: Command) => {
  const { models, out, sign } = readOptions(cmd, MANIFEST_OPTIONS);
  for (const m of models) if (!existsSync(m)) throw new ConfigError(`model file not found: ${m}`);
  if (sign && !existsSync(sign)) throw new ConfigError(`key file not found: ${sign}`);
  try {
    const manifest = await createManifest(models, sign);
    await writeManifest(out, manifest);
    process.stdout.write(`${JSON.stringify({ out, files: manifest.files, signed: !!manifest.signature })}\n`);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
});

addOptions(
  program
    .command('keygen')
    .description('write an ed25519 key pair for signing manifests: manifest-key.pem (0600) and manifest-key.pub.pem'),
  KEYGEN_OPTIONS,
).action(async (_o, cmd: Command) => {
  const o = readOptions(cmd, KEYGEN_OPTIONS);
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

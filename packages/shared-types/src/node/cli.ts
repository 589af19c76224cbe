/**
 * The plumbing every vigil binary shares: how an error ends the process (one line on stderr, the
 * error's exit code), how SIGTERM/SIGINT stop a service (graceful close, then exit; a second
 * signal exits at once). Reading a configuration file is config-file.ts (it needs zod, which a
 * CLI's start-up should not load: see light.ts).
 */
import { describeError, exitCodeFor } from '../errors.js';
import { ExitCode } from '../process.js';

/** What of commander's Command the head of a binary sets (duck-typed). */
export interface ProgramLike {
  description(text: string): this;
  version(version: string, flags?: string, description?: string): this;
  helpOption(flags?: string, description?: string): this;
  exitOverride(): this;
}

/**
 * The head of a vigil binary's program: its description, and `-V, --version` and `-h, --help`
 * worded alike in every binary; usage errors are thrown, for runCli to end the process with 78.
 */
export function binProgram<C extends ProgramLike>(cmd: C, description: string, version: string): C {
  return cmd
    .description(description)
    .version(version, '-V, --version', 'print the version and exit')
    .helpOption('-h, --help', 'print this help and exit')
    .exitOverride();
}

/** A commander error (duck-typed: the contracts depend on no CLI library). */
function isUsageError(err: unknown): err is { exitCode: number; code: string } {
  const e = err as { code?: unknown; exitCode?: unknown } | null;
  return typeof e?.code === 'string' && e.code.startsWith('commander.') && typeof e.exitCode === 'number';
}

/** The exit code of an error that ended a CLI: --help/--version 0, a usage error 78, else the error's own. */
export function cliExitCode(err: unknown): number {
  if (isUsageError(err)) return err.exitCode === 0 ? ExitCode.OK : ExitCode.CONFIG;
  return exitCodeFor(err);
}

/**
 * Runs a CLI's main function. An error that ends it is printed as one line `BIN: message (hint)`
 * (a usage error was already printed by the parser) and sets the exit code; the process then ends
 * when nothing is left to do, so that output is not cut.
 */
export async function runCli(bin: string, main: () => Promise<unknown>): Promise<void> {
  try {
    await main();
  } catch (err) {
    if (!isUsageError(err)) process.stderr.write(`${bin}: ${describeError(err)}\n`);
    process.exitCode = cliExitCode(err);
  }
}

export interface StoppableLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  /** Flushes the log (bounded); awaited before exiting. */
  close?(): Promise<void>;
}

/**
 * Stops a service on SIGTERM or SIGINT: logs `stopping`, awaits `close()` and exits 0 (1 when the
 * close failed), after flushing the log. A second signal exits 1 at once. Returns a function that
 * removes the handlers.
 */
export function stopOnSignals(
  service: { close(): Promise<void> },
  logger: StoppableLogger,
  notifier?: { stopping(status?: string): void },
): () => void {
  let signals = 0;
  const stop = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) process.exit(ExitCode.FAILURE);
    logger.info('stopping', { signal });
    notifier?.stopping(`stopping (${signal})`);
    service
      .close()
      .then(
        () => ExitCode.OK,
        (err) => {
          logger.error('shutdown failed', { error: describeError(err) });
          return ExitCode.FAILURE;
        },
      )
      .then(async (code) => {
        await logger.close?.(); // the last lines reach the log
        process.exit(code);
      });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  return () => {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
  };
}

/**
 * The command-line side of a long-running service (the messaging daemon, the relay, the inference
 * server): its service-manager notifications follow its lifecycle's state (lifecycle.ts `onState`),
 * in one place for all three.
 */
import type { ServiceLogLevel } from '../log.js';
import { binProgram, type ProgramLike, runCli, type StoppableLogger, stopOnSignals } from './cli.js';
import type { ServiceState } from './lifecycle.js';
import { createServiceLogger, type ServiceLogger, type WinstonLike } from './logger.js';
import { addOptions, type CommandLike, type OptionsOf, type OptionTable, readOptions } from './options.js';
import { type NotifierOptions, type ServiceNotifier, serviceNotifier } from './sd-notify.js';

/**
 * The notifications of each state: `serving` sends READY=1 with `STATUS=serving WHAT` (READY=1 goes
 * once: a service that said it while loading, as the inference server does once it listens, only
 * changes its STATUS=); `stopping` sends STOPPING=1 (once: the signal handler may have sent it, with
 * the signal's name). `loading` is the state a service starts in; `stopped` ends the process.
 */
export function followLifecycle(notifier: ServiceNotifier, what = ''): (state: ServiceState) => void {
  return (state) => {
    if (state === 'serving') notifier.ready(what ? `serving ${what}` : 'serving');
    else if (state === 'stopping') notifier.stopping('stopping');
  };
}

/**
 * Starts a service under SIGTERM/SIGINT handlers (stopOnSignals: a signal that comes while it starts
 * stops it cleanly once it has started) and a notifier that follows its lifecycle; `what` is said
 * after `serving`. Resolves with the started service; rejects as its start does.
 */
export async function serveUntilSignalled<H extends { close(): Promise<void> }>(
  logger: StoppableLogger & { warn(message: string): void },
  what: string,
  start: (onState: (state: ServiceState) => void) => Promise<H>,
  notify: Omit<NotifierOptions, 'warn'> = {},
): Promise<H> {
  const notifier = serviceNotifier({ ...notify, warn: (m) => logger.warn(m) });
  let started: Promise<H> | undefined;
  stopOnSignals({ close: async () => (await started)?.close() }, logger, notifier);
  started = start(followLifecycle(notifier, what));
  return started;
}

/** What of commander's Command a service's binary uses (duck-typed). */
export type ServiceCommand = ProgramLike &
  CommandLike & {
    action(fn: () => Promise<void>): unknown;
    parseAsync(argv: readonly string[]): Promise<unknown>;
  };

/** A long-running service's binary: its options table (with `--log-level` and `--log-file`) and its start. */
export interface ServiceBinary<T extends OptionTable> {
  /** `new Command(BIN)` of commander. */
  readonly command: ServiceCommand;
  /** The service's own winston module (see logger.ts). */
  readonly winston: WinstonLike;
  readonly description: string;
  readonly version: string;
  readonly options: T;
  /** Said after `serving` in the service manager's STATUS= line (the account, the addresses). */
  readonly what: (o: OptionsOf<T>) => string;
  /** Starts the service from its options; `onState` is its lifecycle's hook. */
  readonly start: (
    o: OptionsOf<T>,
    logger: ServiceLogger,
    onState: (state: ServiceState) => void,
  ) => Promise<{ close(): Promise<void> }>;
}

/**
 * The whole command line of a long-running service, the same for each: the program from its options
 * table (binProgram, addOptions), the options read and checked, the JSON logger of `--log-level` and
 * `--log-file`, the start under the signal handlers with a notifier that follows the lifecycle
 * (serveUntilSignalled), and an error that ends it printed and turned into the exit code (runCli).
 */
export function runServiceBinary<T extends OptionTable>(b: ServiceBinary<T>): Promise<void> {
  const bin = b.options.bin;
  const program = addOptions(binProgram(b.command, b.description, b.version), b.options);
  program.action(async () => {
    const o = readOptions(program, b.options);
    const { logLevel, logFile } = o as unknown as { logLevel: ServiceLogLevel; logFile?: string | undefined };
    const logger = createServiceLogger(b.winston, { level: logLevel, file: logFile, service: bin });
    await serveUntilSignalled(logger, b.what(o), (onState) => b.start(o, logger, onState));
  });
  return runCli(bin, () => program.parseAsync(process.argv));
}

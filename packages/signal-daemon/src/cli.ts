import {
  addOptions,
  binProgram,
  createServiceLogger,
  readOptions,
  runCli,
  serviceNotifier,
  stopOnSignals,
} from '@vigil/shared-types/node';
import { Command } from 'commander';
import winston from 'winston';
import { optionsFromFlags } from './config.js';
import { start } from './daemon.js';
import { SIGNAL_DAEMON_OPTIONS } from './options.js';
import { VERSION } from './version.js';

const BIN = 'signal-daemon';

const program = addOptions(
  binProgram(
    new Command(BIN),
    'Serve one messaging account over JSON-RPC (HTTP and TCP) with Server-Sent Events of incoming messages.',
    VERSION,
  ),
  SIGNAL_DAEMON_OPTIONS,
).action(async () => {
  const o = readOptions(program, SIGNAL_DAEMON_OPTIONS);
  const logger = createServiceLogger(winston, { level: o.logLevel, file: o.logFile, service: BIN });
  // The handlers are in place before `listening` is logged: a SIGTERM sent as soon as a
  // supervisor reads that line stops the daemon cleanly (exit 0) instead of killing it.
  let started: Promise<{ close(): Promise<void> }> | undefined;
  // systemd's Type=notify (or the dev supervisor): READY=1 once both listeners serve; the watchdog
  // is fed while the event loop turns.
  const notifier = serviceNotifier({ warn: (m) => logger.warn(m) });
  stopOnSignals({ close: async () => (await started)?.close() }, logger, notifier);
  started = start(optionsFromFlags(o, logger));
  await started;
  notifier.ready(`serving ${o.account}`);
});

await runCli(BIN, () => program.parseAsync(process.argv));

import {
  addOptions,
  binProgram,
  createServiceLogger,
  readOptions,
  runCli,
  serveUntilSignalled,
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
  // Signal handlers before `listening` is logged (a SIGTERM sent as soon as a supervisor reads that
  // line stops the daemon cleanly, exit 0); READY=1 once both listeners serve.
  await serveUntilSignalled(logger, o.account, (onState) => start({ ...optionsFromFlags(o, logger), onState }));
});

await runCli(BIN, () => program.parseAsync(process.argv));

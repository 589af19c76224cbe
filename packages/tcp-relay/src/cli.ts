import { formatHostPort } from '@vigil/shared-types';
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
import { relayConfig, TCP_RELAY_OPTIONS } from './options.js';
import { startRelay } from './relay.js';
import { VERSION } from './version.js';

const BIN = 'tcp-relay';

const program = addOptions(
  binProgram(
    new Command(BIN),
    "Republish the messaging daemon's TCP listener on the host-to-VM link address.",
    VERSION,
  ),
  TCP_RELAY_OPTIONS,
).action(async () => {
  const o = readOptions(program, TCP_RELAY_OPTIONS);
  const logger = createServiceLogger(winston, { level: o.logLevel, file: o.logFile, service: BIN });
  // READY=1 once the relay runs (bound, or waiting for its listen address to appear).
  const what = `${formatHostPort(o.listen)} -> ${formatHostPort(o.target)}`;
  await serveUntilSignalled(logger, what, (onState) => startRelay(relayConfig(o, logger), onState));
});

await runCli(BIN, () => program.parseAsync(process.argv));

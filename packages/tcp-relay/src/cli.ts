import { formatHostPort } from '@vigil/shared-types';
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
  const relay = await startRelay(relayConfig(o, logger));
  // systemd's Type=notify (or the dev supervisor): ready once the relay runs; the watchdog is fed
  // while the event loop turns.
  const notifier = serviceNotifier({ warn: (m) => logger.warn(m) });
  stopOnSignals(relay, logger, notifier);
  notifier.ready(`relaying ${formatHostPort(o.listen)} to ${formatHostPort(o.target)}`);
});

await runCli(BIN, () => program.parseAsync(process.argv));

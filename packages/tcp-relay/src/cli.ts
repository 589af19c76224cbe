import { formatHostPort } from '@vigil/shared-types';
import { runServiceBinary } from '@vigil/shared-types/node';
import { Command } from 'commander';
import winston from 'winston';
import { relayConfig, TCP_RELAY_OPTIONS } from './options.js';
import { startRelay } from './relay.js';
import { VERSION } from './version.js';

// READY=1 once the relay runs (bound, or waiting for its listen address to appear).
await runServiceBinary({
  command: new Command('tcp-relay'),
  winston,
  description: "Republish the messaging daemon's TCP listener on the host-to-VM link address.",
  version: VERSION,
  options: TCP_RELAY_OPTIONS,
  what: (o) => `${formatHostPort(o.listen)} -> ${formatHostPort(o.target)}`,
  start: (o, logger, onState) => startRelay(relayConfig(o, logger), onState),
});

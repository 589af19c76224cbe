import { runServiceBinary } from '@vigil/shared-types/node';
import { Command } from 'commander';
import winston from 'winston';
import { optionsFromFlags } from './config.js';
import { start } from './daemon.js';
import { SIGNAL_DAEMON_OPTIONS } from './options.js';
import { VERSION } from './version.js';

// Signal handlers before `listening` is logged (a SIGTERM sent as soon as a supervisor reads that
// line stops the daemon cleanly, exit 0); READY=1 once both listeners serve.
await runServiceBinary({
  command: new Command('signal-daemon'),
  winston,
  description: 'Serve one messaging account over JSON-RPC (HTTP and TCP) with Server-Sent Events of incoming messages.',
  version: VERSION,
  options: SIGNAL_DAEMON_OPTIONS,
  what: (o) => o.account,
  start: (o, logger, onState) => start({ ...optionsFromFlags(o, logger), onState }),
});

import { isIP } from 'node:net';
import {
  ConfigError,
  envVarFor,
  formatHostPort,
  parseHostPort,
  RELAY_LISTEN,
  RELAY_REFUSED_METHODS,
  RELAY_TARGET,
  SERVICE_LOG_LEVELS,
  splitList,
} from '@vigil/shared-types';
import {
  createServiceLogger,
  envOption,
  FlagValueError,
  flagParser,
  intFlag,
  runCli,
  secondsFlag,
  serviceNotifier,
  stopOnSignals,
} from '@vigil/shared-types/node';
import { Command, Option } from 'commander';
import winston from 'winston';
import { DEFAULT_BYTES_PER_MINUTE } from './budget.js';
import { defaultAllow, parseCidr } from './cidr.js';
import { startRelay } from './relay.js';
import { VERSION } from './version.js';

const BIN = 'tcp-relay';

/** A switch from the environment: 1/true/yes on, 0/false/no or empty off; anything else is bad usage. */
const ALLOW_FILE_PARAMS_ENV = envVarFor(BIN, '--allow-file-params');
function envSwitch(name: string): boolean {
  const v = (process.env[name] ?? '').trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['', '0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name}: expected 1 or 0 (true/false, yes/no), got ${JSON.stringify(process.env[name])}`);
}

/** `--source-address`: an IP address, or `none`. */
function sourceAddress(text: string): string {
  if (text === 'none' || isIP(text) !== 0) return text;
  throw new FlagValueError(`expected an IP address or none, got ${JSON.stringify(text)}`);
}

/**
 * The relay connects to a daemon on 127.0.0.1 from 127.0.0.2 (every 127/8 address is the
 * loopback interface on Linux): the daemon's default --relay-source, so it knows the VM consumer.
 */
function defaultSource(targetHost: string): string | null {
  return process.platform === 'linux' && targetHost === '127.0.0.1' ? '127.0.0.2' : null;
}

const seconds = secondsFlag(0, 'expected a number of seconds');
const count = intFlag(1, 'expected a positive integer');
const countOrZero = intFlag(0, 'expected an integer of at least 0');
const opt = (flags: string, description: string) => envOption(BIN, new Option(flags, description));

const program = new Command(BIN)
  .description("Republish the messaging daemon's TCP listener on the host-to-VM link address.")
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .addOption(
    opt('--listen <addr>', 'where guests connect (the link address)')
      .argParser(flagParser((t) => parseHostPort(t)))
      .default(RELAY_LISTEN, formatHostPort(RELAY_LISTEN)),
  )
  .addOption(
    opt('--target <addr>', "the daemon's TCP listener")
      .argParser(flagParser((t) => parseHostPort(t)))
      .default(RELAY_TARGET, formatHostPort(RELAY_TARGET)),
  )
  .addOption(
    opt(
      '--source-address <addr>',
      'connect to the target from this local address, or none (default: 127.0.0.2 on Linux when the target is 127.0.0.1)',
    ).argParser(flagParser(sourceAddress)),
  )
  .addOption(
    opt('--allow <cidrs>', "sources allowed, comma-separated CIDRs (default: the link's /24 and loopback)").argParser(
      flagParser((t) => splitList(t).map(parseCidr)),
    ),
  )
  .addOption(opt('--max-connections <n>', 'most guest connections at once').argParser(count).default(64))
  .addOption(
    opt('--connect-timeout <s>', 'a target that does not accept within this closes the guest connection')
      .argParser(seconds)
      .default(5),
  )
  .addOption(
    opt('--idle-timeout <s>', 'close a connection idle this long both ways (0: never)').argParser(seconds).default(0),
  )
  .addOption(
    opt(
      '--filter <list>',
      `off, default (${RELAY_REFUSED_METHODS.join(',')}), or a comma-separated list of refused methods`,
    ).default('default'),
  )
  .addOption(
    new Option(
      '--allow-file-params',
      `with the filter on, let params name host files (attachments, avatars as paths rather than data: URIs); env ${ALLOW_FILE_PARAMS_ENV}=1`,
    ),
  )
  .addOption(
    opt('--max-line-bytes <n>', 'longest request line from a guest when filtering')
      .argParser(count)
      .default(8 * 1024 * 1024),
  )
  .addOption(
    opt(
      '--max-bytes-per-minute <n>',
      'most bytes one guest address may send a minute (all its connections); over it, reading is slowed (0: no limit)',
    )
      .argParser(countOrZero)
      .default(DEFAULT_BYTES_PER_MINUTE),
  )
  .addOption(
    opt('--watch-interval <s>', 'how often the listen address is checked, and a bind retried while it is absent')
      .argParser(seconds)
      .default(1),
  )
  .addOption(
    opt('--shutdown-grace <s>', 'on SIGTERM, connections get this long before they are cut')
      .argParser(seconds)
      .default(2),
  )
  .addOption(opt('--log-level <level>', 'error, warn, info or debug').choices(SERVICE_LOG_LEVELS).default('info'))
  .addOption(opt('--log-file <file>', 'append the JSON log here instead of stdout'))
  .exitOverride()
  .action(async (o) => {
    const allowFileParams = o.allowFileParams === true || envSwitch(ALLOW_FILE_PARAMS_ENV);
    const logger = createServiceLogger(winston, { level: o.logLevel, file: o.logFile, service: BIN });
    const filter = String(o.filter).trim();
    const refuse = filter === 'off' ? null : filter === 'default' ? RELAY_REFUSED_METHODS : splitList(filter);
    const relay = await startRelay({
      listen: o.listen,
      target: o.target,
      sourceAddress:
        o.sourceAddress === undefined
          ? defaultSource(o.target.host)
          : o.sourceAddress === 'none'
            ? null
            : o.sourceAddress,
      allow: o.allow ?? defaultAllow(o.listen.host),
      maxConnections: o.maxConnections,
      connectTimeoutMs: o.connectTimeout * 1000,
      idleTimeoutMs: o.idleTimeout * 1000,
      refuse,
      allowFileParams,
      maxLineBytes: o.maxLineBytes,
      maxBytesPerMinute: o.maxBytesPerMinute,
      bindRetryMs: Math.max(10, o.watchInterval * 1000),
      watchIntervalMs: Math.max(10, o.watchInterval * 1000),
      shutdownGraceMs: o.shutdownGrace * 1000,
      logger,
    });
    // systemd's Type=notify (or the dev supervisor): ready once the relay runs; the watchdog is fed
    // while the event loop turns.
    const notifier = serviceNotifier({ warn: (m) => logger.warn(m) });
    stopOnSignals(relay, logger, notifier);
    notifier.ready(`relaying ${formatHostPort(o.listen)} to ${formatHostPort(o.target)}`);
  });

await runCli(BIN, () => program.parseAsync(process.argv));

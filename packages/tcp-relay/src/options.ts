/**
 * The relay's options, declared once: the command line, the environment, `--help` and the stack's
 * argv come from TCP_RELAY_OPTIONS; `relayConfig` turns the typed values into startRelay's config.
 */
import { isIP } from 'node:net';
import type { HostPort, Logger } from '@vigil/shared-types';
import {
  defineOptions,
  FlagValueError,
  flagParser,
  formatHostPort,
  intFlag,
  type OptionsOf,
  parseHostPort,
  RELAY_LISTEN,
  RELAY_REFUSED_METHODS,
  RELAY_TARGET,
  SERVICE_LOG_LEVELS,
  secondsFlag,
  splitList,
} from '@vigil/shared-types/light';
import { DEFAULT_BYTES_PER_MINUTE } from './budget.js';
import { defaultAllow, parseCidr } from './cidr.js';
import type { RelayConfig } from './config.js';

const address = {
  parse: flagParser((text: string) => parseHostPort(text)),
  format: formatHostPort,
} as const;
const seconds = secondsFlag(0, 'expected a number of seconds');
const millis = {
  parse: (text: string): number => Math.round(seconds(text) * 1000),
  format: (ms: number): string => String(ms / 1000),
} as const;
const count = intFlag(1, 'expected a positive integer');

/** `--source-address`: an IP address, or `none` (null). */
function sourceAddress(text: string): string | null {
  if (text === 'none') return null;
  if (isIP(text) !== 0) return text;
  throw new FlagValueError(`expected an IP address or none, got ${JSON.stringify(text)}`);
}

/** `--filter`: off (null), default (RELAY_REFUSED_METHODS) or a list of refused methods. */
const filter = {
  parse: (text: string): readonly string[] | null => {
    const t = text.trim();
    return t === 'off' ? null : t === 'default' ? RELAY_REFUSED_METHODS : splitList(t);
  },
  format: (refuse: readonly string[] | null): string =>
    refuse === null ? 'off' : refuse === RELAY_REFUSED_METHODS ? 'default' : refuse.join(','),
} as const;

export const TCP_RELAY_OPTIONS = defineOptions('tcp-relay', {
  listen: { arg: '<addr>', help: 'where guests connect (the link address)', ...address, default: RELAY_LISTEN },
  target: { arg: '<addr>', help: "the daemon's TCP listener", ...address, default: RELAY_TARGET },
  'source-address': {
    arg: '<addr>',
    help: 'connect to the target from this local address, or none',
    parse: sourceAddress,
    format: (a: string | null): string => a ?? 'none',
    defaultHelp: '127.0.0.2 on Linux when the target is 127.0.0.1',
  },
  allow: {
    arg: '<cidrs>',
    help: 'sources allowed, comma-separated CIDRs',
    parse: flagParser((t: string) => splitList(t).map(parseCidr)),
    format: (cidrs: ReturnType<typeof parseCidr>[]): string => cidrs.map((c) => c.text).join(','),
    defaultHelp: "the link's /24 and loopback",
  },
  'max-connections': { arg: '<n>', help: 'most guest connections at once', parse: count, default: 64 },
  'connect-timeout': {
    arg: '<s>',
    key: 'connectTimeoutMs',
    help: 'a target that does not accept within this closes the guest connection',
    ...millis,
    default: 5_000,
  },
  'idle-timeout': {
    arg: '<s>',
    key: 'idleTimeoutMs',
    help: 'close a connection idle this long both ways (0: never)',
    ...millis,
    default: 0,
  },
  filter: {
    arg: '<list>',
    key: 'refuse',
    help: `off, default (${RELAY_REFUSED_METHODS.join(',')}), or a comma-separated list of refused methods`,
    ...filter,
    default: RELAY_REFUSED_METHODS,
  },
  'allow-file-params': {
    help: 'with the filter on, let params name host files (attachments, avatars as paths rather than data: URIs)',
  },
  'max-line-bytes': {
    arg: '<n>',
    help: 'longest request line from a guest when filtering',
    parse: count,
    default: 8 * 1024 * 1024,
  },
  'max-bytes-per-minute': {
    arg: '<n>',
    help: 'most bytes one guest address may send a minute (all its connections); over it, reading is slowed (0: no limit)',
    parse: intFlag(0, 'expected an integer of at least 0'),
    default: DEFAULT_BYTES_PER_MINUTE,
  },
  'watch-interval': {
    arg: '<s>',
    key: 'watchIntervalMs',
    help: 'how often the listen address is checked, and a bind retried while it is absent',
    ...millis,
    default: 1_000,
  },
  'shutdown-grace': {
    arg: '<s>',
    key: 'shutdownGraceMs',
    help: 'on SIGTERM, connections get this long before they are cut',
    ...millis,
    default: 2_000,
  },
  'log-level': { arg: '<level>', help: 'error, warn, info or debug', choices: SERVICE_LOG_LEVELS, default: 'info' },
  'log-file': { arg: '<file>', help: 'append the JSON log here', defaultHelp: 'stdout' },
});

/**
 * The relay connects to a daemon on 127.0.0.1 from 127.0.0.2 (every 127/8 address is the
 * loopback interface on Linux): the daemon's default --relay-source, so it knows the VM consumer.
 */
function defaultSource(target: HostPort): string | null {
  return process.platform === 'linux' && target.host === '127.0.0.1' ? '127.0.0.2' : null;
}

/** The typed flags → startRelay's config (the defaults that depend on other flags decided here). */
export function relayConfig(o: OptionsOf<typeof TCP_RELAY_OPTIONS>, logger: Logger): RelayConfig {
  const { logLevel: _level, logFile: _file, sourceAddress, allow, watchIntervalMs, ...rest } = o;
  const watch = Math.max(10, watchIntervalMs);
  return {
    ...rest,
    sourceAddress: sourceAddress === undefined ? defaultSource(o.target) : sourceAddress,
    allow: allow ?? defaultAllow(o.listen.host),
    bindRetryMs: watch,
    watchIntervalMs: watch,
    logger,
  };
}

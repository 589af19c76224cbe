/**
 * The daemon's options, declared once: the command line, the environment, `--help`, the defaults
 * of `start()` and the stack's argv all come from SIGNAL_DAEMON_OPTIONS.
 */
import { isIP } from 'node:net';
import {
  DAEMON_HTTP,
  DAEMON_TCP,
  defineOptions,
  FlagValueError,
  intFlag,
  listenOption,
  MESSAGING_LIMITS,
  millisOption,
  type OptionSpecs,
  SERVICE_LOG_LEVELS,
  secondsFlag,
} from '@vigil/shared-types/light';
import { consumerNameError } from './consumers.js';

/** The shortest local network retention: 3.6 s (for tests; days are what users want). */
export const MIN_LOCALNET_RETENTION_HOURS = 0.001;

const onOff = {
  choices: ['on', 'off'],
  parse: (text: string): boolean => {
    if (text !== 'on' && text !== 'off') throw new FlagValueError('expected on or off');
    return text === 'on';
  },
  format: (on: boolean): string => (on ? 'on' : 'off'),
} as const;

const consumerName = (name: string): string => {
  const bad = consumerNameError(name, new Set([name]));
  if (bad) throw new FlagValueError(bad);
  return name;
};

const ipAddress = (text: string): string => {
  if (isIP(text) === 0) throw new FlagValueError('expected an IP address');
  return text;
};

/** The account, its backend, its listeners and limits. */
const SERVING = {
  account: { short: '-a', arg: '<number>', help: 'the account to serve, E.164 (e.g. +15550000001)', required: true },
  backend: {
    arg: '<kind>',
    help: 'messaging network: local (embedded) or signal-cli (real Signal)',
    choices: ['local', 'signal-cli'],
    default: 'local',
  },
  'signal-cli': {
    arg: '<path>',
    key: 'signalCliProgram',
    help: 'the signal-cli program (signal-cli backend)',
    parse: (text: string): string => {
      if (text.trim() === '') throw new FlagValueError('expected the name or path of a program');
      return text;
    },
    default: 'signal-cli',
  },
  'signal-cli-config': {
    arg: '<dir>',
    key: 'signalCliConfigDir',
    help: "signal-cli's --config directory",
    defaultHelp: "signal-cli's own",
  },
  'signal-cli-arg': {
    arg: '<arg>',
    key: 'signalCliArgs',
    help: 'one more argument for signal-cli before jsonRpc (repeatable)',
    repeatable: true,
  },
  'call-timeout': {
    arg: '<s>',
    key: 'callTimeoutMs',
    help: 'signal-cli backend: a call not answered in this time fails with -3',
    ...millisOption(0.001),
    default: 60_000,
  },
  http: { arg: '<addr>', help: 'HTTP listener HOST:PORT, or off', ...listenOption, default: DAEMON_HTTP },
  tcp: { arg: '<addr>', help: 'TCP listener HOST:PORT, or off', ...listenOption, default: DAEMON_TCP },
  metrics: { arg: '<addr>', help: 'Prometheus metrics listener HOST:PORT', ...listenOption, defaultHelp: 'off' },
  'data-dir': { arg: '<dir>', help: 'per-account state', defaultHelp: '$XDG_DATA_HOME/vigil/signal-daemon/ACCOUNT' },
  localnet: { arg: '<file>', help: 'the local network file', defaultHelp: '$XDG_DATA_HOME/vigil/localnet.sqlite' },
  'receive-mode': {
    arg: '<mode>',
    help: 'on-start: every TCP connection gets receive notifications; manual: after subscribeReceive',
    choices: ['on-start', 'manual'],
    default: 'on-start',
  },
  'max-request-bytes': {
    arg: '<n>',
    help: 'largest HTTP body or TCP line',
    parse: intFlag(64),
    default: 8 * 1024 * 1024,
  },
  'max-batch': {
    arg: '<n>',
    help: 'most requests in one JSON-RPC batch',
    parse: intFlag(1),
    default: MESSAGING_LIMITS.batchRequests,
  },
  'allow-origin': {
    arg: '<origin>',
    key: 'allowOrigins',
    help: 'a web origin (scheme://host[:port]) whose pages may call the RPC and events paths (repeatable)',
    repeatable: true,
    defaultHelp: 'none',
  },
  'allow-non-loopback': { help: 'allow listening on addresses other than loopback' },
  'profile-name': { arg: '<name>', help: 'the name other accounts see', defaultHelp: 'the number' },
} as const satisfies OptionSpecs;

/** What is kept and given (retention, held messages, consumers), time limits and the log. */
const KEEPING = {
  'retention-hours': {
    arg: '<n>',
    help: 'keep incoming messages for SSE replay this long',
    parse: intFlag(0),
    default: 24 * 7,
  },
  'retention-messages': { arg: '<n>', help: 'and at most this many', parse: intFlag(1), default: 100_000 },
  'retention-bytes': {
    arg: '<n>',
    help: 'and at most this many bytes of messages (the oldest go first)',
    parse: intFlag(1024),
    default: 1024 * 1024 * 1024,
  },
  'localnet-retention-hours': {
    arg: '<n>',
    help: 'local network: keep records of sent messages, mail nobody picked up and attachments this long',
    parse: secondsFlag(
      MIN_LOCALNET_RETENTION_HOURS,
      `expected a number of hours of at least ${MIN_LOCALNET_RETENTION_HOURS}`,
    ),
    default: 24 * 30,
  },
  synchronous: {
    arg: '<mode>',
    help: 'normal: commits survive a crash of the process; full: also a power cut (slower)',
    choices: ['normal', 'full'],
    default: 'normal',
  },
  hold: {
    arg: '<on|off>',
    help: 'give what arrived while no consumer was connected to the next one that connects',
    ...onOff,
    default: true,
  },
  'hold-hours': { arg: '<n>', help: 'held messages older than this are not given', parse: intFlag(0), default: 24 * 7 },
  'hold-messages': {
    arg: '<n>',
    help: 'at most this many of the newest held messages are given',
    parse: intFlag(1),
    default: 10_000,
  },
  'hold-bytes': {
    arg: '<n>',
    help: 'at most this many bytes of the newest held messages are given',
    parse: intFlag(1024),
    default: 256 * 1024 * 1024,
  },
  consumer: {
    arg: '<name>',
    key: 'consumers',
    help: 'a consumer name an SSE stream (?consumer=) or subscribeReceive may give, besides sse, tcp and relay (repeatable)',
    parse: consumerName,
    repeatable: true,
  },
  'relay-source': {
    arg: '<addr>',
    key: 'relaySources',
    help: 'TCP connections from this source address are the relay consumer (repeatable)',
    parse: ipAddress,
    repeatable: true,
    default: ['127.0.0.2'],
  },
  'link-timeout': {
    arg: '<s>',
    key: 'linkTimeoutMs',
    help: 'how long finishLink waits for a primary device',
    ...millisOption(0.001),
    default: 60_000,
  },
  'shutdown-grace': {
    arg: '<s>',
    key: 'shutdownGraceMs',
    help: 'on SIGTERM, how long calls under way may take to finish',
    ...millisOption(0),
    default: 5_000,
  },
  'max-connections': {
    arg: '<n>',
    help: 'most TCP connections, and most SSE streams',
    parse: intFlag(1),
    default: 1024,
  },
  'max-connections-per-source': {
    arg: '<n>',
    help: 'most TCP connections from one source address',
    parse: intFlag(1),
    defaultHelp: '256, at most half of --max-connections',
  },
  'tcp-idle-timeout': {
    arg: '<s>',
    key: 'tcpIdleTimeoutMs',
    help: 'close a TCP connection that receives nothing and sends no request this long; 0: never',
    ...millisOption(0),
    default: 300_000,
  },
  'attachment-dir': {
    arg: '<dir>',
    key: 'attachmentDirs',
    help: 'attachment file paths must lie in this directory (repeatable)',
    repeatable: true,
    defaultHelp: 'anywhere',
  },
  'log-level': { arg: '<level>', help: 'error, warn, info or debug', choices: SERVICE_LOG_LEVELS, default: 'info' },
  'log-file': { arg: '<file>', help: 'append the JSON log here', defaultHelp: 'stdout' },
} as const satisfies OptionSpecs;

export const SIGNAL_DAEMON_OPTIONS = defineOptions('signal-daemon', { ...SERVING, ...KEEPING });

/** The per-source cap when none is given: 256, at most half of the global cap. */
export const PER_SOURCE_DEFAULT = 256;

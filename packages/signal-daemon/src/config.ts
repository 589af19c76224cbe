import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@vigil/shared-types';
import {
  DAEMON_HTTP,
  DAEMON_TCP,
  type HostPort,
  isLoopbackHost,
  isPhoneNumber,
  isWildcardHost,
  MESSAGING_LIMITS,
  parseAllowedOrigins,
} from '@vigil/shared-types';
import { consumerNameError } from './consumers.js';
import { ConfigError } from './errors.js';
import type { Synchronous } from './sqlite.js';

export type BackendKind = 'local' | 'signal-cli';
export type ReceiveMode = 'on-start' | 'manual';

export interface DaemonConfig {
  /** The account this daemon serves, E.164. */
  readonly account: string;
  readonly backend: BackendKind;
  /** null: no HTTP listener. */
  readonly http: HostPort | null;
  /** null: no TCP listener. */
  readonly tcp: HostPort | null;
  /** The Prometheus metrics listener; null (the default): none. */
  readonly metrics: HostPort | null;
  /** Per-account state: received attachments (and, with signal-cli, the inbox). */
  readonly dataDir: string;
  /** The local network's SQLite file, shared by every daemon of this user. */
  readonly localnet: string;
  readonly receiveMode: ReceiveMode;
  /** Largest HTTP body and TCP line accepted. */
  readonly maxRequestBytes: number;
  /** Most requests in one JSON-RPC batch. */
  readonly maxBatch: number;
  /** Web origins (scheme://host[:port]) whose pages may call /api/v1/rpc and /api/v1/events; none by default. */
  readonly allowOrigins: readonly string[];
  readonly allowNonLoopback: boolean;
  /** The profile name other accounts see as sourceName (default: the number). */
  readonly profileName: string;
  /** Incoming messages are kept for SSE replay this long... */
  readonly retentionHours: number;
  /** ...and at most this many... */
  readonly retentionMessages: number;
  /** ...and at most this many bytes of message JSON (the oldest go first). */
  readonly retentionBytes: number;
  /**
   * Local network: records of sent messages (what reactions, remote deletes and edits point at),
   * mail no daemon picked up and attachments are kept this long (fractions allowed).
   */
  readonly localnetRetentionHours: number;
  /** How commits to the network file and the inbox reach the disk (see sqlite.ts). */
  readonly synchronous: Synchronous;
  /** Held messages: what arrived while no consumer was connected goes to the next one (off: it starts at the present). */
  readonly hold: boolean;
  /** Held messages older than this are not given... */
  readonly holdHours: number;
  /** ...nor more than this many of the newest... */
  readonly holdMessages: number;
  /** ...nor more than this many bytes of them. */
  readonly holdBytes: number;
  /** Consumer names besides the built-in sse, tcp and relay (`?consumer=`, `subscribeReceive`). */
  readonly consumers: readonly string[];
  /** TCP connections from these source addresses are the relay consumer (the VM). */
  readonly relaySources: readonly string[];
  /** Bounded wait of finishLink for a primary to accept. */
  readonly linkTimeoutMs: number;
  /** On shutdown, in-flight calls get this long to finish. */
  readonly shutdownGraceMs: number;
  /** Most simultaneous TCP connections and SSE streams (each). */
  readonly maxConnections: number;
  /**
   * Most simultaneous TCP connections from one source address: at most maxConnections; by
   * default 256, and never more than half of maxConnections, so one source cannot take every slot.
   */
  readonly maxConnectionsPerSource: number;
  /** A TCP connection that receives no notifications and sends no request this long is closed; 0: never. */
  readonly tcpIdleTimeoutMs: number;
  /** Directories attachment paths must lie in (symlinks resolved); empty: anywhere. */
  readonly attachmentDirs: readonly string[];
  readonly signalCli: SignalCliConfig;
  readonly logger: Logger;
}

/** How the signal-cli backend runs and supervises its child. */
export interface SignalCliConfig {
  /** The signal-cli program (a path, or a name looked up on PATH). */
  readonly program: string;
  /** signal-cli's --config directory; its default when absent. */
  readonly configDir?: string | undefined;
  /** More arguments, placed before the jsonRpc command (e.g. --trust-new-identities always). */
  readonly extraArgs: readonly string[];
  readonly callTimeoutMs: number;
  /** A `version` ping every so often proves the child still answers. */
  readonly pingIntervalMs: number;
  readonly pingTimeoutMs: number;
  /** The first answer after a start may take longer (the JVM starts, the store migrates). */
  readonly startTimeoutMs: number;
  /** Restart backoff: doubles from the first value up to the second. */
  readonly restartInitialMs: number;
  readonly restartMaxMs: number;
  /** On close, the child gets this long after SIGTERM before SIGKILL. */
  readonly stopTimeoutMs: number;
}

export const DEFAULTS = {
  backend: 'local' as BackendKind,
  receiveMode: 'on-start' as ReceiveMode,
  maxRequestBytes: 8 * 1024 * 1024,
  maxBatch: MESSAGING_LIMITS.batchRequests,
  retentionHours: 24 * 7,
  retentionMessages: 100_000,
  retentionBytes: 1024 * 1024 * 1024,
  localnetRetentionHours: 24 * 30,
  synchronous: 'normal' as Synchronous,
  hold: true,
  holdHours: 24 * 7,
  holdMessages: 10_000,
  holdBytes: 256 * 1024 * 1024,
  relaySources: ['127.0.0.2'],
  linkTimeoutMs: 60_000,
  shutdownGraceMs: 5_000,
  maxConnections: 1024,
  maxConnectionsPerSource: 256,
  tcpIdleTimeoutMs: 300_000,
  http: DAEMON_HTTP,
  tcp: DAEMON_TCP,
  signalCli: {
    program: 'signal-cli',
    extraArgs: [] as string[],
    callTimeoutMs: 60_000,
    pingIntervalMs: 30_000,
    pingTimeoutMs: 20_000,
    startTimeoutMs: 90_000,
    restartInitialMs: 1_000,
    restartMaxMs: 60_000,
    stopTimeoutMs: 5_000,
  } satisfies SignalCliConfig,
};

/** The shortest local network retention: 3.6 s (for tests; days are what users want). */
export const MIN_LOCALNET_RETENTION_HOURS = 0.001;

/** $XDG_DATA_HOME/vigil, or ~/.local/share/vigil. */
export function dataHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  return join(xdg?.startsWith('/') ? xdg : join(homedir(), '.local', 'share'), 'vigil');
}

export type DaemonOptions = Partial<Omit<DaemonConfig, 'signalCli'>> & {
  readonly account: string;
  readonly signalCli?: Partial<SignalCliConfig>;
};

/** Fills defaults and checks the configuration; throws ConfigError with a one-line reason. */
export function resolveConfig(options: DaemonOptions, logger: Logger): DaemonConfig {
  if (!isPhoneNumber(options.account)) {
    throw new ConfigError(`invalid account "${options.account}": expected a number in E.164 form, e.g. +15550000001`);
  }
  const home = dataHome();
  const config: DaemonConfig = {
    backend: DEFAULTS.backend,
    http: DEFAULTS.http,
    tcp: DEFAULTS.tcp,
    metrics: null,
    dataDir: join(home, 'signal-daemon', options.account),
    localnet: join(home, 'localnet.sqlite'),
    receiveMode: DEFAULTS.receiveMode,
    maxRequestBytes: DEFAULTS.maxRequestBytes,
    maxBatch: DEFAULTS.maxBatch,
    allowOrigins: [],
    allowNonLoopback: false,
    profileName: options.account,
    retentionHours: DEFAULTS.retentionHours,
    retentionMessages: DEFAULTS.retentionMessages,
    retentionBytes: DEFAULTS.retentionBytes,
    localnetRetentionHours: DEFAULTS.localnetRetentionHours,
    synchronous: DEFAULTS.synchronous,
    hold: DEFAULTS.hold,
    holdHours: DEFAULTS.holdHours,
    holdMessages: DEFAULTS.holdMessages,
    holdBytes: DEFAULTS.holdBytes,
    consumers: [],
    relaySources: DEFAULTS.relaySources,
    linkTimeoutMs: DEFAULTS.linkTimeoutMs,
    shutdownGraceMs: DEFAULTS.shutdownGraceMs,
    maxConnections: DEFAULTS.maxConnections,
    tcpIdleTimeoutMs: DEFAULTS.tcpIdleTimeoutMs,
    attachmentDirs: [],
    logger,
    ...stripUndefined(options),
    account: options.account,
    maxConnectionsPerSource: perSource(options),
    signalCli: { ...DEFAULTS.signalCli, ...stripUndefined(options.signalCli ?? {}) },
  };
  if (config.backend !== 'local' && config.backend !== 'signal-cli') {
    throw new ConfigError(`invalid backend "${config.backend}": expected local or signal-cli`);
  }
  if (config.receiveMode !== 'on-start' && config.receiveMode !== 'manual') {
    throw new ConfigError(`invalid receive mode "${config.receiveMode}": expected on-start or manual`);
  }
  for (const [name, addr] of [
    ['http', config.http],
    ['tcp', config.tcp],
    ['metrics', config.metrics],
  ] as const) {
    if (addr && !config.allowNonLoopback && !isLoopbackHost(addr.host)) {
      throw new ConfigError(
        `refusing to listen for ${name} on non-loopback address ${addr.host}${isWildcardHost(addr.host) ? ' (every interface)' : ''}: pass --allow-non-loopback to do it anyway`,
      );
    }
  }
  if (!config.http && !config.tcp) throw new ConfigError('both --http and --tcp are off: nothing to serve');
  positive('max-request-bytes', config.maxRequestBytes, 64);
  positive('max-batch', config.maxBatch, 1);
  try {
    parseAllowedOrigins(config.allowOrigins);
  } catch (err) {
    throw new ConfigError(`--allow-origin: ${(err as Error).message}`);
  }
  positive('retention-hours', config.retentionHours, 0);
  positive('retention-messages', config.retentionMessages, 1);
  positive('localnet-retention-hours', config.localnetRetentionHours, MIN_LOCALNET_RETENTION_HOURS);
  positive('hold-hours', config.holdHours, 0);
  positive('hold-messages', config.holdMessages, 1);
  positive('retention-bytes', config.retentionBytes, 1024);
  positive('hold-bytes', config.holdBytes, 1024);
  for (const name of config.consumers) {
    const bad = consumerNameError(name, new Set([name]));
    if (bad) throw new ConfigError(`invalid --consumer "${name}": ${bad}`);
  }
  for (const addr of config.relaySources) {
    if (isIP(addr) === 0) throw new ConfigError(`invalid --relay-source "${addr}": expected an IP address`);
  }
  positive('link-timeout', config.linkTimeoutMs, 1);
  positive('shutdown-grace', config.shutdownGraceMs, 0);
  positive('max-connections', config.maxConnections, 1);
  positive('max-connections-per-source', config.maxConnectionsPerSource, 1);
  positive('tcp-idle-timeout', config.tcpIdleTimeoutMs, 0);
  positive('call-timeout', config.signalCli.callTimeoutMs, 1);
  if (config.signalCli.program.trim() === '') throw new ConfigError('--signal-cli must name a program');
  return config;
}

/** The per-source cap: as given (at most the global cap), else the default, at most half of it. */
function perSource(o: DaemonOptions): number {
  const max = o.maxConnections ?? DEFAULTS.maxConnections;
  const given = o.maxConnectionsPerSource;
  return given === undefined
    ? Math.min(DEFAULTS.maxConnectionsPerSource, Math.max(1, Math.ceil(max / 2)))
    : Math.min(given, max);
}

function positive(name: string, value: number, min: number): void {
  if (!Number.isFinite(value) || value < min) {
    throw new ConfigError(`invalid --${name} ${value}: expected a number of at least ${min}`);
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '@vigil/shared-types';
import { type HostPort, isLoopbackHost, isPhoneNumber, isWildcardHost, parseAllowedOrigins } from '@vigil/shared-types';
import { defaultsOf, type OptionsOf, optionProblem } from '@vigil/shared-types/light';
import { ConfigError } from './errors.js';
import { PER_SOURCE_DEFAULT, SIGNAL_DAEMON_OPTIONS } from './options.js';
import type { Synchronous } from './sqlite.js';

export { MIN_LOCALNET_RETENTION_HOURS } from './options.js';

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

/** How the signal-cli child is supervised: not flags (the call timeout is `--call-timeout`). */
const SIGNAL_CLI_SUPERVISION = {
  pingIntervalMs: 30_000,
  pingTimeoutMs: 20_000,
  startTimeoutMs: 90_000,
  restartInitialMs: 1_000,
  restartMaxMs: 60_000,
  stopTimeoutMs: 5_000,
} as const;

/** $XDG_DATA_HOME/vigil, or ~/.local/share/vigil. */
export function dataHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_DATA_HOME;
  return join(xdg?.startsWith('/') ? xdg : join(homedir(), '.local', 'share'), 'vigil');
}

export type DaemonOptions = Partial<Omit<DaemonConfig, 'signalCli'>> & {
  readonly account: string;
  readonly signalCli?: Partial<SignalCliConfig>;
};

/** The typed flags (SIGNAL_DAEMON_OPTIONS) → the options of `start()`. */
export function optionsFromFlags(o: OptionsOf<typeof SIGNAL_DAEMON_OPTIONS>, logger: Logger): DaemonOptions {
  const { signalCliProgram, signalCliConfigDir, signalCliArgs, callTimeoutMs, logLevel, logFile, ...rest } = o;
  return {
    ...rest,
    metrics: o.metrics ?? null,
    signalCli: { program: signalCliProgram, configDir: signalCliConfigDir, extraArgs: signalCliArgs, callTimeoutMs },
    logger,
  };
}

/** Fills defaults (the flags' own) and checks the configuration; throws ConfigError with a one-line reason. */
export function resolveConfig(options: DaemonOptions, logger: Logger): DaemonConfig {
  if (!isPhoneNumber(options.account)) {
    throw new ConfigError(`invalid account "${options.account}": expected a number in E.164 form, e.g. +15550000001`);
  }
  const home = dataHome();
  const {
    signalCliProgram,
    signalCliArgs,
    callTimeoutMs,
    logLevel: _l,
    ...defaults
  } = defaultsOf(SIGNAL_DAEMON_OPTIONS);
  const signalCli = {
    program: signalCliProgram as string,
    extraArgs: signalCliArgs as string[],
    callTimeoutMs: callTimeoutMs as number,
    ...SIGNAL_CLI_SUPERVISION,
    ...stripUndefined(options.signalCli ?? {}),
  };
  const config = {
    ...(defaults as Omit<DaemonConfig, 'account' | 'signalCli' | 'logger'>),
    metrics: null,
    dataDir: join(home, 'signal-daemon', options.account),
    localnet: join(home, 'localnet.sqlite'),
    profileName: options.account,
    logger,
    ...stripUndefined(options),
    account: options.account,
    maxConnectionsPerSource: perSource(options, defaults.maxConnections as number),
    signalCli,
  } satisfies DaemonConfig;
  const problem = optionProblem(SIGNAL_DAEMON_OPTIONS, {
    ...config,
    signalCliProgram: signalCli.program,
    signalCliArgs: signalCli.extraArgs,
    callTimeoutMs: signalCli.callTimeoutMs,
  });
  if (problem) throw new ConfigError(`invalid ${problem}`);
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
  try {
    parseAllowedOrigins(config.allowOrigins);
  } catch (err) {
    throw new ConfigError(`--allow-origin: ${(err as Error).message}`);
  }
  return config;
}

/** The per-source cap: as given (at most the global cap), else the default, at most half of it. */
function perSource(o: DaemonOptions, defaultMax: number): number {
  const max = o.maxConnections ?? defaultMax;
  const given = o.maxConnectionsPerSource;
  return given === undefined ? Math.min(PER_SOURCE_DEFAULT, Math.max(1, Math.ceil(max / 2))) : Math.min(given, max);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

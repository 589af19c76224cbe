/**
 * The guardian's configuration: a JSON file, validated with shared-types' `validateConfig` (every
 * problem reported at once, unknown keys included), the spec's limits as defaults, relative paths
 * resolved against the file's own directory.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import {
  ConfigValidationError,
  formatHostPort,
  GUARDIAN_DEFAULTS,
  type HostPort,
  INFERENCE_HTTP,
  type Schema,
  type ServiceManagerConfig,
  validateConfig,
} from '@vigil/shared-types';

export interface BackendConfig {
  /** The label events give this backend (`agent`). */
  readonly agent: string;
  /** Its plain HTTP listener. */
  readonly http: HostPort;
  /** The model id probes ask for. */
  readonly model: string;
  readonly service: ServiceManagerConfig;
  /** Its access log: lines of successful completions defer probes (busy detection). */
  readonly accessLog?: string;
}

export interface PrimaryConfig extends BackendConfig {
  /** Its log, scanned for fatal patterns. */
  readonly log?: string;
  /** The binary the integrity check verifies. */
  readonly binary?: string;
  /** A sha256 manifest of the binary (inference-server's manifest JSON, or `sha256sum` lines). */
  readonly manifest?: string;
  /** Also run `codesign --verify --strict` on the binary (macOS). */
  readonly codesign: boolean;
  /** The argv `restore` runs to prove the binary works standalone (must exit 0). */
  readonly standalone?: readonly string[];
  readonly standaloneTimeoutS: number;
}

export interface AlertConfig {
  /** The messaging daemon's HTTP listener (JSON-RPC at /api/v1/rpc). */
  readonly rpc: HostPort;
  readonly recipient: readonly string[];
  /** The sending account, for a daemon serving several (signal-cli's multi-account mode). */
  readonly account?: string;
  readonly timeoutS: number;
}

export interface GuardianConfig {
  readonly intervalS: number;
  readonly probeBudgetS: number;
  readonly busyWindowS: number;
  readonly failuresBeforeRestart: number;
  readonly maxRestarts: number;
  readonly restartWindowS: number;
  readonly modelListIntervalS: number;
  readonly canaryIntervalS: number;
  readonly integrityIntervalS: number;
  readonly circuitBreakerCauses: number;
  readonly circuitWindowS: number;
  readonly recentLogS: number;
  readonly commandTimeoutS: number;
  readonly probePrompt: string;
  readonly canaryPrompt: string;
  readonly canaryMaxTokens: number;
  readonly stateFile: string;
  readonly lockFile: string;
  /** The event log; absent: standard output. */
  readonly logFile?: string;
  readonly primary: PrimaryConfig;
  readonly fallback?: BackendConfig;
  readonly alert?: AlertConfig;
}

/** Defaults of the keys that are not limits of spec 8. */
export const EXTRA_DEFAULTS = {
  circuitWindowS: 3600,
  recentLogS: 300,
  commandTimeoutS: 30,
  probePrompt: 'ping',
  canaryPrompt: 'Reply with one word: hello.',
  canaryMaxTokens: 16,
  stateFile: 'guardian-state.json',
  lockFile: 'inference-fallback.lock',
  standaloneTimeoutS: 30,
  alertTimeoutS: 5,
} as const;

const seconds = (def: number, doc: string, min = 0): Schema => ({ type: 'number', min, default: def, doc });
const positive = (def: number, doc: string): Schema => ({ type: 'number', min: 0.001, default: def, doc });
const count = (def: number, doc: string, min = 1): Schema => ({
  type: 'number',
  integer: true,
  min,
  default: def,
  doc,
});
const path = (doc: string, def?: string): Schema =>
  def === undefined
    ? { type: 'string', nonEmpty: true, optional: true, doc }
    : { type: 'string', nonEmpty: true, default: def, doc };

const backendFields = (role: 'primary' | 'fallback'): Record<string, Schema> => ({
  agent: { type: 'string', nonEmpty: true, optional: true, doc: 'label in events' },
  http: {
    type: 'address',
    optional: role === 'fallback',
    default: role === 'primary' ? formatHostPort(INFERENCE_HTTP) : undefined,
  },
  model: { type: 'string', nonEmpty: true, optional: role === 'fallback' },
  service: { type: 'service' },
  accessLog: path('access log'),
});

/** The schema of the configuration file (shared-types' small schema language). */
export const CONFIG_SCHEMA: Schema = {
  type: 'object',
  fields: {
    intervalS: seconds(GUARDIAN_DEFAULTS.intervalS, 'seconds between ticks'),
    probeBudgetS: positive(GUARDIAN_DEFAULTS.probeBudgetS, 'seconds a probe may take'),
    busyWindowS: seconds(GUARDIAN_DEFAULTS.busyWindowS, 'a success logged this recently defers the probe'),
    failuresBeforeRestart: count(GUARDIAN_DEFAULTS.failuresBeforeRestart, 'consecutive failures that restart'),
    maxRestarts: count(GUARDIAN_DEFAULTS.maxRestarts, 'restarts allowed per restartWindowS'),
    restartWindowS: positive(GUARDIAN_DEFAULTS.restartWindowS, 'the restart rate-limit window'),
    modelListIntervalS: seconds(GUARDIAN_DEFAULTS.modelListIntervalS, 'model-list probe cadence (0: off)'),
    canaryIntervalS: seconds(GUARDIAN_DEFAULTS.canaryIntervalS, 'canary chat cadence (0: off)'),
    integrityIntervalS: seconds(GUARDIAN_DEFAULTS.integrityIntervalS, 'integrity check cadence (0: off)'),
    circuitBreakerCauses: count(GUARDIAN_DEFAULTS.circuitBreakerCauses, 'distinct root causes that halt remediation'),
    circuitWindowS: positive(EXTRA_DEFAULTS.circuitWindowS, 'root causes older than this are forgotten'),
    recentLogS: seconds(EXTRA_DEFAULTS.recentLogS, 'how far back the first read of the primary log looks'),
    commandTimeoutS: positive(EXTRA_DEFAULTS.commandTimeoutS, 'limit of every service-manager command'),
    probePrompt: { type: 'string', nonEmpty: true, default: EXTRA_DEFAULTS.probePrompt },
    canaryPrompt: { type: 'string', nonEmpty: true, default: EXTRA_DEFAULTS.canaryPrompt },
    canaryMaxTokens: count(EXTRA_DEFAULTS.canaryMaxTokens, 'tokens the canary asks for'),
    stateFile: path('state file', EXTRA_DEFAULTS.stateFile),
    lockFile: path('fallback lock file', EXTRA_DEFAULTS.lockFile),
    logFile: path('event log (absent: stdout)'),
    primary: {
      type: 'object',
      fields: {
        ...backendFields('primary'),
        log: path('primary log, scanned for fatal patterns'),
        binary: path('the primary binary'),
        manifest: path('sha256 manifest of the binary'),
        codesign: { type: 'boolean', default: false },
        standalone: { type: 'array', items: { type: 'string' }, optional: true },
        standaloneTimeoutS: positive(EXTRA_DEFAULTS.standaloneTimeoutS, 'limit of the standalone check'),
      },
    },
    fallback: { type: 'object', optional: true, fields: backendFields('fallback') },
    alert: {
      type: 'object',
      optional: true,
      fields: {
        rpc: { type: 'address' },
        recipient: { type: 'array', items: { type: 'string', nonEmpty: true } },
        account: { type: 'string', nonEmpty: true, optional: true },
        timeoutS: positive(EXTRA_DEFAULTS.alertTimeoutS, 'limit of the alert request'),
      },
    },
  },
};

/** A configuration file that cannot be used: missing, not JSON, or invalid (exit 78). */
export class ConfigFileError extends Error {
  readonly code = 'ECONFIG';
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(`${file}: ${message}`);
    this.name = 'ConfigFileError';
  }
}

const defaultAgent = (service: ServiceManagerConfig, role: 'primary' | 'fallback'): string =>
  service.kind === 'launchd' ? service.label : service.kind === 'systemd' ? service.unit : role;

/** The file as validateConfig gives it back: defaults filled, addresses parsed, paths as written. */
interface RawBackend {
  readonly agent?: string;
  readonly http?: HostPort;
  readonly model?: string;
  readonly service: ServiceManagerConfig;
  readonly accessLog?: string;
}
interface RawPrimary extends RawBackend {
  readonly http: HostPort;
  readonly model: string;
  readonly log?: string;
  readonly binary?: string;
  readonly manifest?: string;
  readonly codesign: boolean;
  readonly standalone?: readonly string[];
  readonly standaloneTimeoutS: number;
}
type RawConfig = Omit<GuardianConfig, 'primary' | 'fallback' | 'alert'> & {
  readonly primary: RawPrimary;
  readonly fallback?: RawBackend;
  readonly alert?: AlertConfig;
};

/**
 * Validates a parsed configuration and fills every default; `baseDir` resolves relative paths.
 * Throws ConfigValidationError listing every problem.
 */
export function parseConfig(value: unknown, baseDir: string): GuardianConfig {
  const raw = validateConfig<RawConfig>(value, CONFIG_SCHEMA);
  const problems: string[] = [];
  const abs = (p: string | undefined) => (p === undefined ? undefined : isAbsolute(p) ? p : resolve(baseDir, p));
  const argv = (key: string, a: readonly string[] | undefined) => {
    if (a !== undefined && a.length === 0) problems.push(`${key}: must not be empty`);
    return a;
  };
  const p = raw.primary;
  const primaryService = p.service;
  const primary: PrimaryConfig = {
    agent: p.agent ?? defaultAgent(primaryService, 'primary'),
    http: p.http,
    model: p.model,
    service: primaryService,
    accessLog: abs(p.accessLog),
    log: abs(p.log),
    binary: abs(p.binary),
    manifest: abs(p.manifest),
    codesign: p.codesign,
    standalone: argv('primary.standalone', p.standalone),
    standaloneTimeoutS: p.standaloneTimeoutS,
  };
  if (primary.manifest && !primary.binary) problems.push('primary.manifest: needs primary.binary');
  if (primary.codesign && !primary.binary) problems.push('primary.codesign: needs primary.binary');
  for (const action of ['restart', 'stop', 'start'] as const) {
    if (primaryService.kind === 'command') argv(`primary.service.${action}`, primaryService[action]);
  }
  let fallback: BackendConfig | undefined;
  if (raw.fallback) {
    const f = raw.fallback;
    const service = f.service;
    for (const action of ['restart', 'stop', 'start'] as const) {
      if (service.kind === 'command') argv(`fallback.service.${action}`, service[action]);
    }
    fallback = {
      agent: f.agent ?? defaultAgent(service, 'fallback'),
      http: f.http ?? primary.http,
      model: f.model ?? primary.model,
      service,
      accessLog: abs(f.accessLog),
    };
    if (fallback.agent === primary.agent) problems.push('fallback.agent: must differ from the primary agent');
  }
  if (raw.alert && raw.alert.recipient.length === 0) problems.push('alert.recipient: must not be empty');
  if (problems.length > 0) throw new ConfigValidationError(problems);
  const config: GuardianConfig = {
    intervalS: raw.intervalS,
    probeBudgetS: raw.probeBudgetS,
    busyWindowS: raw.busyWindowS,
    failuresBeforeRestart: raw.failuresBeforeRestart,
    maxRestarts: raw.maxRestarts,
    restartWindowS: raw.restartWindowS,
    modelListIntervalS: raw.modelListIntervalS,
    canaryIntervalS: raw.canaryIntervalS,
    integrityIntervalS: raw.integrityIntervalS,
    circuitBreakerCauses: raw.circuitBreakerCauses,
    circuitWindowS: raw.circuitWindowS,
    recentLogS: raw.recentLogS,
    commandTimeoutS: raw.commandTimeoutS,
    probePrompt: raw.probePrompt,
    canaryPrompt: raw.canaryPrompt,
    canaryMaxTokens: raw.canaryMaxTokens,
    stateFile: abs(raw.stateFile)!,
    lockFile: abs(raw.lockFile)!,
    logFile: abs(raw.logFile),
    primary,
    ...(fallback ? { fallback } : {}),
    ...(raw.alert ? { alert: raw.alert } : {}),
  };
  return config;
}

/** Reads, parses and validates a configuration file; throws ConfigFileError with a clear message. */
export function loadConfig(file: string): GuardianConfig {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why =
      e.code === 'ENOENT'
        ? 'no such file'
        : e.code === 'EISDIR'
          ? 'is a directory, not a file'
          : e.code === 'EACCES'
            ? 'permission denied'
            : e.message;
    throw new ConfigFileError(path, `cannot read the configuration: ${why}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfigFileError(path, `not valid JSON: ${(err as Error).message}`);
  }
  try {
    return parseConfig(value, dirname(path));
  } catch (err) {
    if (err instanceof ConfigValidationError) throw new ConfigFileError(path, err.message);
    throw err;
  }
}

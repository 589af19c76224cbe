import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  ConfigValidationError,
  DAEMON_HTTP,
  FLOW_GATEWAY,
  formatHostPort,
  type HostPort,
  RETIRED_PORTS,
  type Schema,
  type ServiceManagerConfig,
  validateConfig,
} from '@vigil/shared-types';

/** The check could not run: bad configuration (exit 3). */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface HealthConfig {
  readonly daemon: {
    readonly http: HostPort;
    /** The daemon's program name (executable, or script run by node). */
    readonly program: string;
    /** Substrings that must also appear in its command line (e.g. the account), to tell daemons apart. */
    readonly processMatch: readonly string[];
    readonly service?: ServiceManagerConfig;
    /** A direct relaunch when the service manager cannot bring it back (started detached). */
    readonly relaunch?: readonly string[];
    /** Where a relaunched daemon's output goes. */
    readonly relaunchLog?: string;
    /** The daemon's log (its `send succeeded` records), for outbound_send. */
    readonly log?: string;
  };
  readonly relay?: { readonly link: HostPort; readonly service?: ServiceManagerConfig };
  readonly retiredPorts: readonly number[];
  readonly gateway?: {
    readonly address: HostPort;
    readonly service?: ServiceManagerConfig;
    readonly log?: string;
    readonly storm: { readonly pattern: string; readonly threshold: number; readonly windowMinutes: number };
  };
  readonly flowConfig?: { readonly path: string; readonly key: string };
  readonly outbound: {
    readonly maxAgeHours: number;
    /** A real send made by the check itself (to a recipient, or a note to self). */
    readonly probe?: { readonly recipient?: string; readonly noteToSelf?: boolean; readonly message: string };
  };
  readonly healthLog: string;
  readonly lockFile: string;
  /** checkMs: each probe; fixMs: each repair; runMs: all repairs of a run together. */
  readonly timeouts: { readonly checkMs: number; readonly fixMs: number; readonly runMs: number };
}

/** $XDG_STATE_HOME/vigil, or ~/.local/state/vigil. */
export function stateHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  return join(xdg?.startsWith('/') ? xdg : join(homedir(), '.local', 'state'), 'vigil');
}

const argv: Schema = { type: 'array', items: { type: 'string' }, optional: true };

export function schema(): Schema {
  return {
    type: 'object',
    fields: {
      daemon: {
        type: 'object',
        default: {},
        fields: {
          http: { type: 'address', default: formatHostPort(DAEMON_HTTP) },
          program: { type: 'string', nonEmpty: true, default: 'signal-daemon' },
          processMatch: { type: 'array', items: { type: 'string', nonEmpty: true }, default: [] },
          service: { type: 'service', optional: true },
          relaunch: argv,
          relaunchLog: { type: 'string', optional: true },
          log: { type: 'string', optional: true },
        },
      },
      relay: {
        type: 'object',
        optional: true,
        fields: { link: { type: 'address' }, service: { type: 'service', optional: true } },
      },
      retiredPorts: {
        type: 'array',
        items: { type: 'number', integer: true, min: 1, max: 65535 },
        default: [...RETIRED_PORTS],
      },
      gateway: {
        type: 'object',
        optional: true,
        fields: {
          address: { type: 'address', default: formatHostPort(FLOW_GATEWAY) },
          service: { type: 'service', optional: true },
          log: { type: 'string', optional: true },
          storm: {
            type: 'object',
            default: {},
            fields: {
              pattern: { type: 'string', nonEmpty: true, default: 'websocket (connected|opened|connection)' },
              threshold: { type: 'number', integer: true, min: 1, default: 30 },
              windowMinutes: { type: 'number', min: 0.01, default: 15 },
            },
          },
        },
      },
      flowConfig: {
        type: 'object',
        optional: true,
        fields: { path: { type: 'string', nonEmpty: true }, key: { type: 'string', nonEmpty: true } },
      },
      outbound: {
        type: 'object',
        default: {},
        fields: {
          maxAgeHours: { type: 'number', min: 0.001, default: 24 },
          probe: {
            type: 'object',
            optional: true,
            fields: {
              recipient: { type: 'string', optional: true },
              noteToSelf: { type: 'boolean', optional: true },
              message: { type: 'string', default: 'vigil health check' },
            },
          },
        },
      },
      healthLog: { type: 'string', default: join(stateHome(), 'health.log') },
      lockFile: { type: 'string', optional: true },
      timeouts: {
        type: 'object',
        default: {},
        fields: {
          checkMs: { type: 'number', integer: true, min: 1, default: 3000 },
          fixMs: { type: 'number', integer: true, min: 1, default: 15000 },
          runMs: { type: 'number', integer: true, min: 1, default: 30000 },
        },
      },
    },
  };
}

/** Validates a parsed configuration and fills its defaults. */
export function resolveConfig(value: unknown): HealthConfig {
  let c: HealthConfig & { lockFile?: string };
  try {
    c = validateConfig(value, schema());
  } catch (err) {
    if (err instanceof ConfigValidationError) throw new ConfigError(err.message);
    throw err;
  }
  const problems: string[] = [];
  if (c.gateway) {
    try {
      new RegExp(c.gateway.storm.pattern, 'i');
    } catch (err) {
      problems.push(`gateway.storm.pattern: ${(err as Error).message}`);
    }
  }
  const probe = c.outbound.probe;
  if (probe && !probe.recipient && !probe.noteToSelf) problems.push('outbound.probe: set recipient or noteToSelf');
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  return { ...c, lockFile: c.lockFile ?? join(dirname(c.healthLog), 'health-check.lock') };
}

/** Reads the configuration file (none: every default, checks of what is not configured skipped). */
export function loadConfig(file: string | undefined): HealthConfig {
  if (file === undefined) return resolveConfig({});
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read the configuration ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`the configuration ${file} is not JSON: ${(err as Error).message}`);
  }
  return resolveConfig(value);
}

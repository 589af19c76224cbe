/**
 * `vigil install` / `vigil uninstall`: the options (checked, with their defaults), the services
 * the units run, and every location (flags, XDG variables unless --prefix, the home directory).
 */
import { accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '@vigil/shared-types';

/** The checkout this code belongs to: four levels above `packages/stack/{src,dist}/deploy/`. */
export const CHECKOUT = fileURLToPath(new URL('../../../../', import.meta.url)).replace(/\/$/, '');
export const DEFAULT_ACCOUNT = '+15550000001';
export const DEFAULT_RELAY = '10.0.0.1:7583';
export const LOCK_NAME = 'inference-fallback.lock';

export type Platform = 'launchd' | 'systemd';

export interface ServiceDef {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly timer?: string;
  readonly relay?: boolean;
  readonly primary?: boolean;
  readonly fallback?: boolean;
}

/** The services, in start order; uninstall goes the other way. */
export const SERVICES: readonly ServiceDef[] = [
  { id: 'signal-daemon', label: 'org.vigil.signal-daemon', unit: 'vigil-signal-daemon.service' },
  { id: 'tcp-relay', label: 'org.vigil.tcp-relay', unit: 'vigil-tcp-relay.service', relay: true },
  {
    id: 'inference-server',
    label: 'org.vigil.inference-server',
    unit: 'vigil-inference-server.service',
    primary: true,
  },
  {
    id: 'inference-fallback',
    label: 'org.vigil.inference-fallback',
    unit: 'vigil-inference-fallback.service',
    fallback: true,
  },
  { id: 'guardian', label: 'org.vigil.guardian', unit: 'vigil-guardian.service' },
  { id: 'status-page', label: 'org.vigil.status-page', unit: 'vigil-status-page.service' },
  {
    id: 'health-check',
    label: 'org.vigil.health-check',
    unit: 'vigil-health-check.service',
    timer: 'vigil-health-check.timer',
  },
];

/** The package binaries a checkout must hold. */
export const BINARIES = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check'] as const;

/** The options as commander hands them over (see command.ts). */
export interface RawOptions {
  platform?: string;
  prefix?: string;
  dryRun?: boolean;
  load: boolean;
  json?: boolean;
  node?: string;
  root?: string;
  account?: string;
  daemonArg: string[];
  model?: string;
  modelId?: string;
  inferenceArg: string[];
  mtls: boolean;
  relayListen?: string;
  guardianMerge?: string;
  healthMerge?: string;
  configDir?: string;
  stateDir?: string;
  dataDir?: string;
  logDir?: string;
  unitDir?: string;
  linger?: boolean;
}

export interface InstallOptions {
  readonly platform: Platform;
  readonly dryRun: boolean;
  readonly load: boolean;
  readonly json: boolean;
  readonly node: string;
  readonly root: string;
  readonly prefix: string | undefined;
  readonly account: string;
  readonly daemonArgs: readonly string[];
  readonly model: string | undefined;
  readonly modelId: string | undefined;
  readonly inferenceArgs: readonly string[];
  readonly mtls: boolean;
  readonly relayListen: string;
  readonly guardianMerge: string | undefined;
  readonly healthMerge: string | undefined;
  readonly dirs: {
    readonly config: string | undefined;
    readonly state: string | undefined;
    readonly data: string | undefined;
    readonly logs: string | undefined;
    readonly units: string | undefined;
  };
  readonly linger: boolean;
}

export interface Locations {
  readonly home: string;
  readonly config: string;
  readonly state: string;
  readonly data: string;
  readonly logs: string;
  readonly units: string;
  readonly pki: string;
}

/** A bad flag: exit 78, with the way to the usage. */
export const usageError = (message: string, command = 'install'): ConfigError =>
  new ConfigError(message, { hint: `run vigil ${command} --help for the options` });

/** Checks the flags and fills in the defaults. */
export function checkOptions(v: RawOptions, command: 'install' | 'uninstall'): InstallOptions {
  const fail = (message: string) => usageError(message, command);
  const platform = v.platform ?? (process.platform === 'darwin' ? 'launchd' : 'systemd');
  if (platform !== 'launchd' && platform !== 'systemd') {
    throw fail(`--platform must be launchd or systemd, got "${platform}"`);
  }
  const abs = (flag: string, p: string | undefined): string | undefined => {
    if (p === undefined) return undefined;
    if (p === '') throw fail(`--${flag} must not be empty`);
    return resolve(p);
  };
  const account = v.account ?? DEFAULT_ACCOUNT;
  if (!/^\+[1-9]\d{5,14}$/.test(account)) throw fail(`--account must be an E.164 number, got "${account}"`);
  const relayListen = v.relayListen ?? DEFAULT_RELAY;
  if (relayListen !== 'off' && !/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(relayListen)) {
    throw fail(`--relay-listen must be HOST:PORT or off, got "${relayListen}"`);
  }
  const modelId = v.modelId;
  if (modelId !== undefined && !/^[A-Za-z0-9._:-]+$/.test(modelId)) {
    throw fail(`--model-id may hold letters, digits and . _ : - only, got "${modelId}"`);
  }
  if (v.linger && platform !== 'systemd') throw fail('--linger is for --platform systemd');
  return {
    platform,
    dryRun: v.dryRun === true,
    load: v.load,
    json: v.json === true,
    node: abs('node', v.node) ?? nodeOnPath(),
    root: abs('root', v.root) ?? CHECKOUT,
    prefix: abs('prefix', v.prefix),
    account,
    daemonArgs: v.daemonArg,
    model: abs('model', v.model),
    modelId,
    inferenceArgs: v.inferenceArg,
    mtls: v.mtls,
    relayListen,
    guardianMerge: abs('guardian-merge', v.guardianMerge),
    healthMerge: abs('health-merge', v.healthMerge),
    dirs: {
      config: abs('config-dir', v.configDir),
      state: abs('state-dir', v.stateDir),
      data: abs('data-dir', v.dataDir),
      logs: abs('log-dir', v.logDir),
      units: abs('unit-dir', v.unitDir),
    },
    linger: v.linger === true,
  };
}

/**
 * The node the services run: the first `node` on PATH as it is named there (a package manager's
 * stable link such as /opt/homebrew/bin/node survives upgrades; the versioned directory it
 * points into does not), else the node running this process.
 */
function nodeOnPath(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, 'node');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return process.execPath;
}

/** Every location, from the flags, the XDG variables (unless --prefix) and the home directory. */
export function locations(o: InstallOptions): Locations {
  const home = o.prefix ?? homedir();
  const xdg = (name: string, fallback: string) => {
    const value = o.prefix ? undefined : process.env[name];
    return value && isAbsolute(value) ? value : join(home, fallback);
  };
  const configHome = xdg('XDG_CONFIG_HOME', '.config');
  const state = o.dirs.state ?? join(xdg('XDG_STATE_HOME', '.local/state'), 'vigil');
  const data = o.dirs.data ?? join(xdg('XDG_DATA_HOME', '.local/share'), 'vigil');
  const config = o.dirs.config ?? join(configHome, 'vigil');
  const logs = o.dirs.logs ?? (o.platform === 'launchd' ? join(home, 'Library', 'Logs', 'vigil') : join(state, 'log'));
  const units =
    o.dirs.units ??
    (o.platform === 'launchd' ? join(home, 'Library', 'LaunchAgents') : join(configHome, 'systemd', 'user'));
  return { home, config, state, data, logs, units, pki: join(data, 'pki') };
}

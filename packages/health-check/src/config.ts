/**
 * The configuration: `healthConfigSchema` of @vigil/shared-types (type, validation, defaults and
 * messages declared there once), with the health log in this user's state directory.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { type HealthConfig, healthConfigSchema, validateConfig } from '@vigil/shared-types';
import { readConfigFile } from '@vigil/shared-types/node';

export type { HealthConfig };

/** $XDG_STATE_HOME/vigil, or ~/.local/state/vigil. */
export function stateHome(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_STATE_HOME;
  return join(xdg?.startsWith('/') ? xdg : join(homedir(), '.local', 'state'), 'vigil');
}

/** The schema, its default health log under `stateHome()` as the environment says now. */
export const schema = () => healthConfigSchema(stateHome());

/** Validates a parsed configuration and fills its defaults (ConfigValidationError naming every problem). */
export function resolveConfig(value: unknown, file?: string): HealthConfig {
  return validateConfig(value, schema(), file);
}

/** Reads the configuration file (none: every default, checks of what is not configured skipped). */
export function loadConfig(file: string | undefined): HealthConfig {
  return file === undefined ? resolveConfig({}) : readConfigFile(file, schema());
}

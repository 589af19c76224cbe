/**
 * The guardian's configuration: a JSON file, validated with its schema from shared-types
 * (`guardianConfigSchema`: every problem reported at once, unknown keys included, the spec's
 * limits as defaults), relative paths resolved against the file's own directory.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import {
  ConfigValidationError,
  type GuardianAlertConfig,
  type GuardianBackendConfig,
  type GuardianConfig,
  type GuardianPrimaryConfig,
  guardianConfigSchema,
  validateConfig,
} from '@vigil/shared-types';
import { ConfigFileError } from './errors.js';

export type { GuardianConfig };
export type PrimaryConfig = GuardianPrimaryConfig;
export type BackendConfig = GuardianBackendConfig;
export type AlertConfig = GuardianAlertConfig;

/**
 * Validates a parsed configuration and fills every default; `baseDir` resolves relative paths.
 * Throws ConfigValidationError listing every problem.
 */
export function parseConfig(value: unknown, baseDir: string): GuardianConfig {
  const schema = guardianConfigSchema((p) => (isAbsolute(p) ? p : resolve(baseDir, p)));
  return validateConfig(value, schema);
}

/** Why a configuration file could not be read, in an operator's words (else the system's message). */
const READ_ERRORS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file',
  EISDIR: 'is a directory, not a file',
  EACCES: 'permission denied',
};

/** Reads, parses and validates a configuration file; throws ConfigFileError with a clear message. */
export function loadConfig(file: string): GuardianConfig {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = READ_ERRORS[e.code ?? ''] ?? e.message;
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

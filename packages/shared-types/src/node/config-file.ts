/** Reading a JSON configuration file, validated by its zod schema. */
import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { validateConfig } from '../config.js';
import { ConfigError } from '../errors.js';

/**
 * Reads and validates a JSON configuration file. Every failure is a ConfigError naming the file
 * (and, for a value, the key).
 */
export function readConfigFile<S extends z.ZodType>(file: string, schema: S): z.output<S> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigError(
      code === 'ENOENT' ? `${file}: no such configuration file` : `${file}: cannot be read (${code ?? err})`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`${file}: not valid JSON: ${(err as Error).message}`);
  }
  return validateConfig(value, schema, file);
}

import { readFileSync } from 'node:fs';

/** This package's version, from its package.json (one level above both src/ and dist/). */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export const BIN = 'health-check';

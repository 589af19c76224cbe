/**
 * Validation of JSON configuration files (the guardian's, the health check's): a small schema,
 * defaults filled in, and every problem reported at once with its path ("daemon.http: expected
 * HOST:PORT, got 8080"), unknown keys included. Pure: the caller reads the file.
 */

import { parseHostPort } from './net.js';
import type { ServiceManagerConfig } from './service.js';

interface Common {
  readonly optional?: boolean;
  readonly default?: unknown;
  readonly doc?: string;
}

export type Schema = Common &
  (
    | { readonly type: 'string'; readonly enum?: readonly string[]; readonly nonEmpty?: boolean }
    | { readonly type: 'number'; readonly min?: number; readonly max?: number; readonly integer?: boolean }
    | { readonly type: 'boolean' }
    /** `HOST:PORT` in the file; a HostPort after validation. */
    | { readonly type: 'address' }
    | { readonly type: 'array'; readonly items: Schema }
    | { readonly type: 'object'; readonly fields: Readonly<Record<string, Schema>> }
    /** A service manager: `{"kind":"launchd"|"systemd"|"command", …}`. */
    | { readonly type: 'service' }
  );

export class ConfigValidationError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join('; ')}`);
    this.name = 'ConfigValidationError';
  }
}

const describe = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : JSON.stringify(v);

const SERVICE: Schema = {
  type: 'object',
  fields: {
    kind: { type: 'string', enum: ['launchd', 'systemd', 'command'] },
    label: { type: 'string', optional: true, nonEmpty: true },
    plist: { type: 'string', optional: true },
    domain: { type: 'string', optional: true },
    unit: { type: 'string', optional: true, nonEmpty: true },
    user: { type: 'boolean', optional: true },
    restart: { type: 'array', items: { type: 'string' }, optional: true },
    stop: { type: 'array', items: { type: 'string' }, optional: true },
    start: { type: 'array', items: { type: 'string' }, optional: true },
  },
};

function check(value: unknown, schema: Schema, path: string, problems: string[]): unknown {
  const at = path || 'the configuration';
  if (value === undefined) {
    if (schema.default !== undefined) return check(structuredClone(schema.default), schema, path, problems);
    if (schema.optional) return undefined;
    problems.push(`${at}: missing`);
    return undefined;
  }
  switch (schema.type) {
    case 'string':
      if (typeof value !== 'string') problems.push(`${at}: expected a string, got ${describe(value)}`);
      else if (schema.nonEmpty && value === '') problems.push(`${at}: must not be empty`);
      else if (schema.enum && !schema.enum.includes(value)) {
        problems.push(`${at}: expected one of ${schema.enum.join(', ')}, got ${JSON.stringify(value)}`);
      }
      return value;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        problems.push(`${at}: expected a number, got ${describe(value)}`);
      } else if (schema.integer && !Number.isInteger(value)) problems.push(`${at}: expected an integer, got ${value}`);
      else if (schema.min !== undefined && value < schema.min) problems.push(`${at}: must be at least ${schema.min}`);
      else if (schema.max !== undefined && value > schema.max) problems.push(`${at}: must be at most ${schema.max}`);
      return value;
    case 'boolean':
      if (typeof value !== 'boolean') problems.push(`${at}: expected true or false, got ${describe(value)}`);
      return value;
    case 'address':
      if (typeof value !== 'string') {
        problems.push(`${at}: expected "HOST:PORT", got ${describe(value)}`);
        return value;
      }
      try {
        return parseHostPort(value);
      } catch (err) {
        problems.push(`${at}: ${(err as Error).message}`);
        return value;
      }
    case 'array':
      if (!Array.isArray(value)) {
        problems.push(`${at}: expected an array, got ${describe(value)}`);
        return value;
      }
      return value.map((v, i) => check(v, schema.items, `${path}[${i}]`, problems));
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        problems.push(`${at}: expected an object, got ${describe(value)}`);
        return value;
      }
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value)) {
        if (!(key in schema.fields)) {
          problems.push(
            `${path ? `${path}.` : ''}${key}: unknown key (known: ${Object.keys(schema.fields).join(', ')})`,
          );
        }
      }
      for (const [key, sub] of Object.entries(schema.fields)) {
        const v = check((value as Record<string, unknown>)[key], sub, path ? `${path}.${key}` : key, problems);
        if (v !== undefined) out[key] = v;
      }
      return out;
    }
    case 'service': {
      const s = check(value, SERVICE, path, problems) as Record<string, unknown> | null;
      if (typeof s !== 'object' || s === null || Array.isArray(s)) return s;
      if (s.kind === 'launchd' && !s.label) problems.push(`${at}.label: required for launchd`);
      if (s.kind === 'systemd' && !s.unit) problems.push(`${at}.unit: required for systemd`);
      if (s.kind === 'command' && !s.restart && !s.start)
        problems.push(`${at}: a command manager needs restart or start`);
      return s as unknown as ServiceManagerConfig;
    }
  }
}

/** Validates and fills defaults; throws ConfigValidationError listing every problem. */
export function validateConfig<T>(value: unknown, schema: Schema): T {
  const problems: string[] = [];
  const out = check(value, schema, '', problems);
  if (problems.length > 0) throw new ConfigValidationError(problems);
  return out as T;
}

/**
 * Configuration files (the guardian's, the health check's, the stack's) are declared once, as a
 * zod schema: their TypeScript type (`z.output<typeof S>`), their validation, their defaults and
 * their error messages all come from it. `validateConfig` reports every problem at once with its
 * path, in an operator's words ("daemon.http: expected "HOST:PORT", got 8080"), unknown keys
 * included. Pure: the caller reads the file (see `readConfigFile` in `@vigil/shared-types/node`).
 */
import { z } from 'zod';
import { ConfigError } from './errors.js';
import { parseHostPort } from './net.js';
import type { ServiceManagerConfig } from './service.js';

export { z };

/** Every problem of a configuration, each "path: what is wrong". */
export class ConfigValidationError extends ConfigError {
  constructor(
    readonly problems: readonly string[],
    readonly file?: string,
  ) {
    super(`${file ? `${file}: ` : ''}invalid configuration: ${problems.join('; ')}`, {
      hint: file ? `fix ${file} and start again` : undefined,
    });
    this.name = 'ConfigValidationError';
  }
}

/** How a value is named in a message: `"yes"`, `8080`, `null`, `an array`, `an object`. */
export const describeValue = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? 'an object' : JSON.stringify(v);

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
};

/** The message of one issue, without its path (zod's own wording replaced by an operator's). */
function message(issue: z.core.$ZodRawIssue): string | undefined {
  const input = issue.input;
  switch (issue.code) {
    case 'invalid_type':
      if (input === undefined) return 'missing';
      if (issue.expected === 'int' || (issue.expected === 'number' && typeof input === 'number')) {
        return Number.isFinite(input) ? `expected an integer, got ${describeValue(input)}` : 'expected a number';
      }
      return `expected ${EXPECTED[issue.expected] ?? issue.expected}, got ${describeValue(input)}`;
    case 'too_small':
      if (issue.origin === 'string' && Number(issue.minimum) === 1) return 'must not be empty';
      if (issue.origin === 'array') return `needs at least ${issue.minimum} item(s)`;
      return `must be at least ${issue.minimum}`;
    case 'too_big':
      if (issue.origin === 'array') return `takes at most ${issue.maximum} item(s)`;
      return `must be at most ${issue.maximum}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => String(v)).join(', ')}, got ${describeValue(input)}`;
    case 'invalid_union':
      return `not a valid value: ${describeValue(input)}`;
    default:
      return undefined;
  }
}

const pathText = (path: readonly PropertyKey[]): string =>
  path.reduce<string>((s, k) => (typeof k === 'number' ? `${s}[${k}]` : s ? `${s}.${String(k)}` : String(k)), '');

/**
 * An object that refuses unknown keys, naming the known ones: "extra: unknown key (known: a, b)".
 * Every object of a configuration file is one of these.
 */
export function strictObject<S extends z.ZodRawShape>(shape: S) {
  const known = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (issue) => (issue.code === 'unrecognized_keys' ? `known: ${known}` : undefined),
  });
}

/** `HOST:PORT` in the file, a HostPort after validation. */
export const addressSchema = z
  .string({
    error: (issue) =>
      issue.input === undefined ? 'missing' : `expected "HOST:PORT", got ${describeValue(issue.input)}`,
  })
  .transform((text, ctx) => {
    try {
      return parseHostPort(text);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  });

const argvSchema = z.array(z.string());

/** A service manager: `{"kind":"launchd"|"systemd"|"command", …}` (see `ServiceManagerConfig`). */
export const serviceManagerSchema = strictObject({
  kind: z.enum(['launchd', 'systemd', 'command']),
  label: z.string().min(1).optional(),
  plist: z.string().optional(),
  domain: z.string().optional(),
  unit: z.string().min(1).optional(),
  user: z.boolean().optional(),
  restart: argvSchema.optional(),
  stop: argvSchema.optional(),
  start: argvSchema.optional(),
})
  .superRefine((s, ctx) => {
    if (s.kind === 'launchd' && !s.label)
      ctx.addIssue({ code: 'custom', path: ['label'], message: 'required for launchd' });
    if (s.kind === 'systemd' && !s.unit)
      ctx.addIssue({ code: 'custom', path: ['unit'], message: 'required for systemd' });
    if (s.kind === 'command' && !s.restart && !s.start) {
      ctx.addIssue({ code: 'custom', message: 'a command manager needs restart or start' });
    }
  })
  .transform((s) => s as ServiceManagerConfig);

/** The problems of a failed parse, unknown keys first, each "path: message". */
export function configProblems(error: z.ZodError): string[] {
  const unknown: string[] = [];
  const other: string[] = [];
  for (const issue of error.issues) {
    const at = pathText(issue.path);
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) unknown.push(`${at ? `${at}.` : ''}${key}: unknown key (${issue.message})`);
    } else {
      other.push(`${at || 'the configuration'}: ${issue.message}`);
    }
  }
  return [...unknown, ...other];
}

/**
 * Validates a configuration and fills its defaults; throws ConfigValidationError listing every
 * problem (named after `file` when given).
 */
export function validateConfig<S extends z.ZodType>(value: unknown, schema: S, file?: string): z.output<S> {
  const r = schema.safeParse(value, { reportInput: true, error: message });
  if (r.success) return r.data;
  throw new ConfigValidationError(configProblems(r.error), file);
}

/** A service manager as written in a configuration file. */
export type ServiceManagerFile = z.input<typeof serviceManagerSchema>;

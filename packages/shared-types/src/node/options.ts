/**
 * A binary's options as data, declared once: per option its flag, environment variable, value
 * parser, default and help. From one table come the commander options (with the environment as
 * fallback and the defaults in `--help`), the validation (a bad value names the flag, exit 78),
 * the typed values, the defaults a service fills in when started in-process, and the argv another
 * program (the stack) passes to the binary.
 *
 * The parsers are the light ones of flags.ts, not zod schemas: the table is read by every
 * `--help` and by `vigil status`, which must start without loading zod (see light.ts).
 * The contracts depend on no CLI library: commander is reached through the command it is given.
 */
import { ConfigError } from '../errors.js';
import { formatHostPort, type HostPort, parseListen } from '../net.js';
import { envVarFor } from '../process.js';
import { collectFlag, flagParser, listFlag, type OptionValues, secondsFlag } from './flags.js';

/** One option of a binary. */
export interface OptionSpec<T = unknown> {
  /** The value's placeholder in the help (`<n>`); absent: a switch (true when given). */
  readonly arg?: string;
  /** A short flag (`-a`). */
  readonly short?: string;
  readonly help: string;
  /** The text of a flag or of its environment variable → the value; throws FlagValueError. */
  readonly parse?: (text: string) => T;
  /** The accepted values (a string option). */
  readonly choices?: readonly string[];
  /** The value when neither the flag nor its variable is given. */
  readonly default?: T;
  /** How the default reads in the help when it is not the value's text (`$XDG_DATA_HOME/…`). */
  readonly defaultHelp?: string;
  /** The value → the flag's text (the help's default, another program's argv); default String(). */
  readonly format?: (value: T) => string;
  /** Given once per value; the values are a list (from the environment: split on commas and spaces). */
  readonly repeatable?: boolean;
  readonly required?: boolean;
  /** Options this one cannot be given with. */
  readonly conflicts?: readonly string[];
  /** The field of the typed values (and of the service's config); default: the flag in camelCase. */
  readonly key?: string;
  /** The environment variable; default BIN_FLAG (BIN_COMMAND_FLAG for a subcommand); false: none. */
  readonly env?: string | false;
}

// biome-ignore lint/suspicious/noExplicitAny: a table holds options of every value type
export type OptionSpecs = Record<string, OptionSpec<any>>;

/** A binary's (or one of its commands') options. */
export interface OptionTable<S extends OptionSpecs = OptionSpecs> {
  readonly bin: string;
  readonly command?: string | undefined;
  readonly specs: S;
}

type Camel<S extends string> = S extends `${infer H}-${infer T}` ? `${H}${Capitalize<Camel<T>>}` : S;
type KeyOf<N extends string, O> = O extends { key: infer K extends string } ? K : Camel<N>;
type ValueOf<O> = O extends { parse: (text: string) => infer V }
  ? V
  : O extends { choices: readonly (infer C)[] }
    ? C
    : string;
type FieldOf<O> = O extends { arg: string }
  ? O extends { repeatable: true }
    ? ValueOf<O>[]
    : O extends { default: unknown } | { required: true }
      ? ValueOf<O>
      : ValueOf<O> | undefined
  : boolean;

/** The typed values of a table: one field per option. */
export type OptionsOf<T extends OptionTable> = {
  -readonly [N in keyof T['specs'] & string as KeyOf<N, T['specs'][N]>]: FieldOf<T['specs'][N]>;
};

/** Declares a binary's options (`command`: a subcommand's own, whose variables are BIN_COMMAND_FLAG). */
export function defineOptions<const S extends OptionSpecs>(bin: string, specs: S, command?: string): OptionTable<S> {
  return { bin, command, specs };
}

const camel = (name: string): string => name.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The field of an option in the typed values. */
export const keyOf = (name: string, spec: OptionSpec): string => spec.key ?? camel(name);

/** The environment variable of an option, or undefined. */
export function envOf(table: OptionTable, name: string): string | undefined {
  const spec = table.specs[name];
  if (spec === undefined) throw new Error(`${table.bin}: no option --${name}`);
  if (spec.env === false) return undefined;
  return spec.env ?? envVarFor(table.bin, table.command ? `${table.command}-${name}` : name);
}

/** An option's value as the flag's text. */
export const formatOption = (spec: OptionSpec, value: unknown): string =>
  spec.format ? spec.format(value) : String(value);

/** What of commander's Option the table sets (duck-typed). */
interface OptionLike {
  env(name: string): OptionLike;
  default(value: unknown, description?: string): OptionLike;
  argParser(fn: (value: string, previous: never) => unknown): OptionLike;
  choices(values: readonly string[]): OptionLike;
  makeOptionMandatory(mandatory?: boolean): OptionLike;
  conflicts(names: string[]): OptionLike;
}

/** What of commander's Command the table uses (duck-typed). */
export interface CommandLike extends OptionValues {
  createOption(flags: string, description?: string): OptionLike;
  addOption(option: never): unknown;
}

/** The flags text of an option (`-a, --account <number>`). */
export const flagsOf = (name: string, spec: OptionSpec): string =>
  `${spec.short ? `${spec.short}, ` : ''}--${name}${spec.arg ? ` ${spec.arg}` : ''}`;

/** commander turns a parser's null into '': a null value travels as this. */
const NULL = Symbol('null');
const nullable =
  (parse: (text: string) => unknown) =>
  (text: string): unknown =>
    parse(text) ?? NULL;

/** Adds the table's options to a command: environment fallback, parser, choices, default in the help. */
export function addOptions<C extends CommandLike>(cmd: C, table: OptionTable): C {
  for (const [name, spec] of Object.entries(table.specs)) {
    // commander shows a default only with a value it sets: one chosen at run time, or a list's
    // (commander would add the values given to it), is told in the text.
    const list = spec.repeatable && spec.default !== undefined ? (spec.default as unknown[]).join(', ') : undefined;
    const shown = spec.default === undefined || spec.repeatable ? (spec.defaultHelp ?? list) : undefined;
    const told = shown === undefined ? '' : ` (default: ${shown})`;
    let option = cmd.createOption(flagsOf(name, spec), `${spec.help}${told}`);
    const env = envOf(table, name);
    if (env) option = option.env(env);
    if (spec.choices) option = option.choices(spec.choices);
    if (spec.repeatable) {
      // Each value is parsed by readOptions: from the environment the whole list is one text.
      option = option.argParser(collectFlag);
    } else if (spec.parse) {
      option = option.argParser(nullable(spec.parse));
    }
    if (spec.default !== undefined && !spec.repeatable)
      option = option.default(spec.default, spec.defaultHelp ?? formatOption(spec, spec.default));
    if (spec.required) option = option.makeOptionMandatory();
    if (spec.conflicts) option = option.conflicts([...spec.conflicts]);
    cmd.addOption(option as never);
  }
  return cmd;
}

/** A switch from the environment: 1/true/yes/on, or 0/false/no/off/empty; anything else is bad usage. */
function envSwitch(name: string): boolean {
  const v = (process.env[name] ?? '').trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['', '0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(`${name}: expected 1 or 0 (true/false, yes/no), got ${JSON.stringify(process.env[name])}`);
}

/** A value parsed outside commander: its error names the flag as commander's would (exit 78). */
function parseNamed(name: string, spec: OptionSpec, text: string): unknown {
  try {
    return spec.parse ? spec.parse(text) : text;
  } catch (err) {
    throw new ConfigError(`option '${flagsOf(name, spec)}' argument '${text}' is invalid. ${(err as Error).message}`);
  }
}

/** The typed values of a parsed command (a repeatable option from the environment is split into a list). */
export function readOptions<T extends OptionTable>(cmd: OptionValues, table: T): OptionsOf<T> {
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table.specs)) {
    const attr = camel(name);
    let value: unknown;
    if (spec.repeatable) {
      const given = listFlag(cmd, attr).map((text) => parseNamed(name, spec, text));
      value = given.length === 0 && spec.default !== undefined ? spec.default : given;
    } else {
      value = cmd.getOptionValue(attr);
      if (value === NULL) value = null;
      if (spec.arg === undefined) {
        const env = envOf(table, name);
        value = cmd.getOptionValueSource(attr) === 'env' && env ? envSwitch(env) : value === true;
      }
    }
    out[keyOf(name, spec)] = value;
  }
  return out as OptionsOf<T>;
}

/** The table's defaults, by field (what a service started in-process falls back on). */
export function defaultsOf<T extends OptionTable>(table: T): Partial<OptionsOf<T>> {
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(table.specs)) {
    if (spec.default !== undefined) out[keyOf(name, spec)] = spec.default;
    else if (spec.repeatable) out[keyOf(name, spec)] = [];
    else if (spec.arg === undefined) out[keyOf(name, spec)] = false;
  }
  return out as Partial<OptionsOf<T>>;
}

/**
 * Checks values given in-process (not through the flags) as the flags would be checked: each is
 * written as its flag's text and read back. Returns the first problem as `--flag: message`.
 */
export function optionProblem(table: OptionTable, values: Record<string, unknown>): string | undefined {
  for (const [name, spec] of Object.entries(table.specs)) {
    const value = values[keyOf(name, spec)];
    if (value === undefined || value === null || spec.arg === undefined) continue;
    for (const one of spec.repeatable && Array.isArray(value) ? value : [value]) {
      const text = formatOption(spec, one);
      if (spec.choices && !spec.choices.includes(text)) {
        return `--${name}: "${text}" is not one of ${spec.choices.join(', ')}`;
      }
      try {
        spec.parse?.(text);
      } catch (err) {
        return `--${name}: ${(err as Error).message} (got ${text})`;
      }
    }
  }
  return undefined;
}

/**
 * The argv that gives these values to the binary: each option whose value is set and differs from
 * its default, in the table's order (a repeatable option once per value; a switch when true).
 */
export function optionArgv<T extends OptionTable>(table: T, values: Partial<OptionsOf<T>>): string[] {
  const argv: string[] = [];
  const given = values as Record<string, unknown>;
  for (const [name, spec] of Object.entries(table.specs)) {
    const value = given[keyOf(name, spec)];
    if (value === undefined) continue;
    if (spec.arg === undefined) {
      if (value === true) argv.push(`--${name}`);
      continue;
    }
    if (spec.repeatable && Array.isArray(value)) {
      for (const one of value) argv.push(`--${name}`, formatOption(spec, one));
      continue;
    }
    if (spec.default !== undefined && formatOption(spec, value) === formatOption(spec, spec.default)) continue;
    argv.push(`--${name}`, formatOption(spec, value));
  }
  return argv;
}

/** A listener address, `HOST:PORT` or `off` (null). */
export const listenOption = {
  parse: flagParser((text: string) => parseListen(text)),
  format: (addr: HostPort | null): string => (addr === null ? 'off' : formatHostPort(addr)),
} as const;

/** A number of seconds on the command line that is milliseconds in the config (fractions allowed). */
export const millisOption = (min = 0, message?: string) =>
  ({
    parse: (text: string): number => Math.round(secondsFlag(min, message)(text) * 1000),
    format: (ms: number): string => String(ms / 1000),
  }) as const;

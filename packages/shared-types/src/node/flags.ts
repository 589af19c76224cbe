/**
 * Parsers for the values of command-line flags, as every vigil binary reads them. The contracts
 * depend on no CLI library: a bad value throws FlagValueError, which carries the code of
 * commander's own InvalidArgumentError, so commander reports it as it reports its own
 * ("error: option '--port <n>' argument '0' is invalid. expected …") and `runCli` exits 78.
 */
import { VIGIL_ERRORS, VigilError } from '../errors.js';
import { splitList } from '../net.js';
import { envVarFor } from '../process.js';

/**
 * A flag value that cannot be used: bad usage (78). Catalogued as VIGIL_ERR_FLAG_VALUE; its `code` is
 * the catalogue's `wire` code, commander's own, so that commander reports it as its own.
 */
export class FlagValueError extends VigilError {
  override readonly code = VIGIL_ERRORS.VIGIL_ERR_FLAG_VALUE.wire;
  constructor(message: string) {
    super(VIGIL_ERRORS.VIGIL_ERR_FLAG_VALUE, message);
  }
}

/** An integer of at least `min`, written in decimal digits. */
export const intFlag =
  (min: number, message = `expected an integer of at least ${min}`) =>
  (text: string): number => {
    const n = Number(text);
    if (!/^\d+$/.test(text.trim()) || n < min) throw new FlagValueError(message);
    return n;
  };

/** A number of seconds (fractions allowed) of at least `min`. */
export const secondsFlag =
  (min = 0, message = `expected a number of seconds of at least ${min}`) =>
  (text: string): number => {
    const n = Number(text);
    if (text.trim() === '' || !Number.isFinite(n) || n < min) throw new FlagValueError(message);
    return n;
  };

/** A value read by `parse` (e.g. `parseListen`); what it throws becomes the flag's error message. */
export const flagParser =
  <T>(parse: (text: string) => T) =>
  (text: string): T => {
    try {
      return parse(text);
    } catch (err) {
      throw new FlagValueError(err instanceof Error ? err.message : String(err));
    }
  };

/** A repeatable flag's parser (commander's argParser): each use adds its value to the list. */
export const collectFlag = (value: string, previous: readonly string[] | undefined): string[] => [
  ...(previous ?? []),
  value,
];

/** What a command (commander's `Command`) tells of one option: its value and where that came from. */
export interface OptionValues {
  getOptionValue(key: string): unknown;
  getOptionValueSource(key: string): string | undefined;
}

/**
 * A repeatable flag's values, one per flag. From the environment the whole list is one string,
 * split on commas and white space (`splitList`, the project's one convention for list-valued
 * variables): a value that itself holds a space or a comma can only be given with the flag.
 */
export function listFlag(cmd: OptionValues, key: string): string[] {
  const v = cmd.getOptionValue(key);
  const values = typeof v === 'string' ? [v] : Array.isArray(v) ? (v as string[]) : [];
  return cmd.getOptionValueSource(key) === 'env' ? values.flatMap(splitList) : values;
}

/**
 * A flag (commander's `Option`) read from its env variable too: BIN_FLAG, or BIN_COMMAND_FLAG for
 * a subcommand's own flags (`envVarFor`).
 */
export function envOption<
  O extends { readonly flags: string; readonly long?: string | undefined; env(name: string): O },
>(bin: string, option: O, command?: string): O {
  const flag = option.long ?? option.flags;
  return option.env(envVarFor(bin, command ? `${command}-${flag}` : flag));
}

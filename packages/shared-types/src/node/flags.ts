/**
 * Parsers for the values of command-line flags, as every vigil binary reads them. The contracts
 * depend on no CLI library: a bad value throws FlagValueError, which carries the code of
 * commander's own InvalidArgumentError, so commander reports it as it reports its own
 * ("error: option '--port <n>' argument '0' is invalid. expected …") and `runCli` exits 78.
 */
import { VigilError } from '../errors.js';
import { ExitCode } from '../process.js';

/** A flag value that cannot be used: bad usage (78). */
export class FlagValueError extends VigilError {
  constructor(message: string) {
    super('commander.invalidArgument', message, { exitCode: ExitCode.CONFIG });
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

import { describe, expect, it } from '@jest/globals';
import { requestTooLarge } from '../src/index.js';
import {
  collectFlag,
  envOption,
  FlagValueError,
  flagParser,
  intFlag,
  listFlag,
  secondsFlag,
} from '../src/node/index.js';

describe('flag value parsers', () => {
  it('reads integers of at least a minimum, with the message given or a default one', () => {
    expect(intFlag(1)('8')).toBe(8);
    expect(intFlag(0)(' 0 ')).toBe(0);
    expect(() => intFlag(1)('0')).toThrow('expected an integer of at least 1');
    expect(() => intFlag(1, 'expected a positive integer')('1.5')).toThrow('expected a positive integer');
    expect(() => intFlag(1)('-3')).toThrow(FlagValueError);
  });

  it('reads seconds, fractions allowed', () => {
    expect(secondsFlag()('0.25')).toBe(0.25);
    expect(() => secondsFlag()('')).toThrow('expected a number of seconds of at least 0');
    expect(() => secondsFlag(1, 'expected a number of seconds')('0.5')).toThrow('expected a number of seconds');
  });

  it("passes a parser's error message on, as a usage error commander reports itself", () => {
    const port = flagParser((t) => {
      if (t !== 'ok') throw new Error(`bad value "${t}"`);
      return t;
    });
    expect(port('ok')).toBe('ok');
    const err = (() => {
      try {
        port('x');
      } catch (e) {
        return e as FlagValueError;
      }
    })();
    expect(err).toBeInstanceOf(FlagValueError);
    expect(err).toMatchObject({ message: 'bad value "x"', code: 'commander.invalidArgument', exitCode: 78 });
  });

  it('collects a repeatable flag; from the environment its one string is split on commas and white space', () => {
    expect(collectFlag('b', collectFlag('a', undefined))).toEqual(['a', 'b']);
    const given = (value: unknown, source: string | undefined) => ({
      getOptionValue: () => value,
      getOptionValueSource: () => source,
    });
    expect(listFlag(given(['a, b', 'c'], 'cli'), 'x')).toEqual(['a, b', 'c']);
    expect(listFlag(given(['a, b  c,,'], 'env'), 'x')).toEqual(['a', 'b', 'c']);
    expect(listFlag(given('a,b', 'env'), 'x')).toEqual(['a', 'b']);
    expect(listFlag(given(undefined, undefined), 'x')).toEqual([]);
  });

  it("binds a flag to its env variable: BIN_FLAG, or BIN_COMMAND_FLAG for a subcommand's flag", () => {
    const option = (long: string | undefined, flags: string) => {
      const o = { flags, long, envVar: '', env: (name: string) => Object.assign(o, { envVar: name }) };
      return o;
    };
    expect(envOption('signal-daemon', option('--max-batch', '--max-batch <n>')).envVar).toBe('SIGNAL_DAEMON_MAX_BATCH');
    expect(envOption('inference-server', option('--out', '-o, --out <f>'), 'make-model').envVar).toBe(
      'INFERENCE_SERVER_MAKE_MODEL_OUT',
    );
  });
});

describe('requestTooLarge', () => {
  it('is -32600 with a null id, naming the unit and the limit', () => {
    expect(requestTooLarge('line', 64)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32600, message: 'Request too large: a line may hold at most 64 bytes', data: null },
      id: null,
    });
    expect(requestTooLarge('body', 1024).error.message).toBe('Request too large: the body may hold at most 1024 bytes');
  });
});

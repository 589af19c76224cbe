import { describe, expect, it } from '@jest/globals';
import {
  AddressError,
  ConfigError,
  ConfigValidationError,
  defineErrors,
  describeError,
  exitCodeFor,
  ManifestFormatError,
  parseHostPort,
  VIGIL_ERRORS,
  VigilError,
} from '../src/index.js';
import { FlagValueError, LockBusyError, SymlinkedDirError } from '../src/node/index.js';

describe('an error catalogue', () => {
  const E = defineErrors({
    VIGIL_ERR_TEST_PLAIN: { message: 'something failed' },
    VIGIL_ERR_TEST_HELPED: { message: 'a lock is held', hint: 'wait for it', exitCode: 2, http: 409, rpc: -3 },
  });

  it('gives each entry its code and its exit code (1 unless it says otherwise)', () => {
    expect(E.VIGIL_ERR_TEST_PLAIN).toEqual({ code: 'VIGIL_ERR_TEST_PLAIN', message: 'something failed', exitCode: 1 });
    expect(E.VIGIL_ERR_TEST_HELPED).toMatchObject({ code: 'VIGIL_ERR_TEST_HELPED', exitCode: 2, http: 409, rpc: -3 });
    expect(Object.isFrozen(E) && Object.isFrozen(E.VIGIL_ERR_TEST_PLAIN)).toBe(true);
  });

  it('takes only namespaced upper-case codes', () => {
    for (const bad of ['VIGIL_ERR_lower', 'VIGIL_ERR_', 'VIGIL_ERR__DOUBLE', 'VIGIL_ERR_TRAILING_', 'VIGIL_HOME']) {
      expect(() =>
        defineErrors({ [bad]: { message: 'x' } } as Record<`VIGIL_ERR_${string}`, { message: string }>),
      ).toThrow(`error code ${bad}: expected VIGIL_ERR_ and upper-case words`);
    }
  });

  it('makes errors that carry the code, the hint and the exit code of their entry', () => {
    const e = new VigilError(E.VIGIL_ERR_TEST_HELPED, 'the lock x is held by pid 7');
    expect(e).toMatchObject({ code: 'VIGIL_ERR_TEST_HELPED', hint: 'wait for it', exitCode: 2, name: 'VigilError' });
    expect(describeError(e)).toBe('the lock x is held by pid 7 (wait for it)');
    expect(exitCodeFor(e)).toBe(2);
    // The message defaults to the catalogue's; a hint given replaces the catalogue's.
    expect(new VigilError(E.VIGIL_ERR_TEST_PLAIN).message).toBe('something failed');
    expect(new VigilError(E.VIGIL_ERR_TEST_HELPED, 'm', { hint: 'end it' }).hint).toBe('end it');
    const cause = new Error('disk');
    expect(new VigilError(E.VIGIL_ERR_TEST_PLAIN, 'm', { cause }).cause).toBe(cause);
  });
});

describe('the shared codes', () => {
  it('are carried by the shared errors, with their exit codes', () => {
    expect(new ConfigError('bad')).toMatchObject({ code: 'VIGIL_ERR_CONFIG', exitCode: 78 });
    expect(new ConfigValidationError(['port: expected a number'], 'c.json')).toMatchObject({
      code: 'VIGIL_ERR_CONFIG',
      exitCode: 78,
      hint: 'fix c.json and start again',
    });
    expect(() => parseHostPort('nowhere')).toThrow(AddressError);
    expect(new AddressError('x')).toMatchObject({ code: 'VIGIL_ERR_ADDRESS', exitCode: 78 });
    expect(new LockBusyError('/tmp/l', 9)).toMatchObject({
      code: 'VIGIL_ERR_LOCK_BUSY',
      exitCode: 1,
      hint: 'wait for it to finish, or end it',
      message: '/tmp/l is held by another process (pid 9)',
    });
    expect(new SymlinkedDirError('/a/b', '/a')).toMatchObject({ code: 'VIGIL_ERR_SYMLINK_DIR', exitCode: 1 });
    expect(new ManifestFormatError('format', 'm')).toMatchObject({ code: 'VIGIL_ERR_MANIFEST_FORMAT', kind: 'format' });
  });

  it("keep commander's code on a bad flag value, so that commander reports it as its own", () => {
    const e = new FlagValueError('expected a port');
    expect(e.code).toBe('commander.invalidArgument');
    expect(e.code).toBe(VIGIL_ERRORS.VIGIL_ERR_FLAG_VALUE.wire);
    expect(e.exitCode).toBe(78);
  });
});

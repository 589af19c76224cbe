/** The guardian's configuration schema: defaults, paths through the reader's resolver, cross-key rules. */
import { describe, expect, it } from '@jest/globals';
import {
  ConfigValidationError,
  GUARDIAN_CONFIG_DEFAULTS,
  GUARDIAN_DEFAULTS,
  type GuardianConfig,
  type GuardianConfigFile,
  guardianConfigSchema,
  validateConfig,
} from '../src/index.js';

const minimal: GuardianConfigFile = {
  primary: { model: 'tiny', service: { kind: 'systemd', unit: 'vigil-inference.service', user: true } },
};

const problems = (value: unknown): readonly string[] => {
  try {
    validateConfig(value, guardianConfigSchema());
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigValidationError);
    return (err as ConfigValidationError).problems;
  }
  throw new Error('expected the configuration to be refused');
};

describe('guardianConfigSchema', () => {
  it('fills the limits of spec 8 and the other defaults; paths as written without a resolver', () => {
    const c: GuardianConfig = validateConfig(minimal, guardianConfigSchema());
    expect(c).toMatchObject({
      intervalS: GUARDIAN_DEFAULTS.intervalS,
      probeBudgetS: GUARDIAN_DEFAULTS.probeBudgetS,
      maxRestarts: GUARDIAN_DEFAULTS.maxRestarts,
      circuitWindowS: GUARDIAN_CONFIG_DEFAULTS.circuitWindowS,
      canaryPrompt: GUARDIAN_CONFIG_DEFAULTS.canaryPrompt,
      stateFile: 'guardian-state.json',
      lockFile: 'inference-fallback.lock',
      primary: {
        agent: 'vigil-inference.service',
        http: { host: '127.0.0.1', port: 1337 },
        codesign: false,
        standaloneTimeoutS: 30,
      },
    });
    expect(c.logFile).toBeUndefined();
    expect('fallback' in c).toBe(false);
  });

  it('resolves every path, defaults included, through the resolver it is given', () => {
    const c = validateConfig(
      {
        ...minimal,
        logFile: 'g.log',
        primary: { ...minimal.primary, log: 'p.log', accessLog: 'a.log', binary: 'bin', manifest: 'm.json' },
        fallback: { service: { kind: 'command', start: ['true'] }, accessLog: 'f.log' },
      },
      guardianConfigSchema((p) => `/base/${p}`),
    );
    expect([c.stateFile, c.lockFile, c.logFile]).toEqual([
      '/base/guardian-state.json',
      '/base/inference-fallback.lock',
      '/base/g.log',
    ]);
    expect(c.primary).toMatchObject({
      log: '/base/p.log',
      accessLog: '/base/a.log',
      binary: '/base/bin',
      manifest: '/base/m.json',
    });
    expect(c.fallback).toEqual({
      agent: 'fallback',
      http: { host: '127.0.0.1', port: 1337 },
      model: 'tiny',
      service: { kind: 'command', start: ['true'] },
      accessLog: '/base/f.log',
    });
  });

  it('checks the rules between keys once the keys themselves are valid', () => {
    expect(problems({ primary: { ...minimal.primary, codesign: true } })).toEqual([
      'primary.codesign: needs primary.binary',
    ]);
    expect(
      problems({ ...minimal, fallback: { service: { kind: 'systemd', unit: 'vigil-inference.service' } } }),
    ).toEqual(['fallback.agent: must differ from the primary agent']);
    expect(
      problems({ ...minimal, fallback: { service: { kind: 'command', start: ['x'], stop: [] } }, alert: {} }),
    ).toEqual([
      'fallback.service.stop: must not be empty',
      'alert: set rpc and recipient (a message), webhook, or both',
    ]);
    expect(problems({ primary: { ...minimal.primary, standalone: [] } })).toEqual([
      'primary.standalone: must not be empty',
    ]);
  });
});

import { describe, expect, it } from '@jest/globals';
import {
  addressSchema,
  ConfigValidationError,
  serviceArgv,
  serviceManagerSchema,
  strictObject,
  validateConfig,
  z,
} from '../src/index.js';

const schema = strictObject({
  name: z.string().min(1),
  mode: z.enum(['a', 'b']).default('a'),
  interval: z.number().min(0).default(60),
  count: z.number().int().min(1).max(10).optional(),
  on: z.boolean().optional(),
  at: addressSchema.prefault('127.0.0.1:8080'),
  argv: z.array(z.string()).optional(),
  nested: strictObject({ deep: z.number().default(3) }).prefault({}),
  service: serviceManagerSchema.optional(),
});

const problems = (value: unknown): readonly string[] => {
  try {
    validateConfig(value, schema);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigValidationError);
    return (err as ConfigValidationError).problems;
  }
  throw new Error('expected the configuration to be refused');
};

describe('validateConfig', () => {
  it('fills defaults, nested ones too, and parses addresses', () => {
    expect(validateConfig({ name: 'x' }, schema)).toEqual({
      name: 'x',
      mode: 'a',
      interval: 60,
      at: { host: '127.0.0.1', port: 8080 },
      nested: { deep: 3 },
    });
    expect(validateConfig({ name: 'x', at: '[::1]:1', nested: { deep: 0 }, argv: ['a', 'b'] }, schema)).toMatchObject({
      at: { host: '::1', port: 1 },
      nested: { deep: 0 },
      argv: ['a', 'b'],
    });
  });

  it('does not share a default between results', () => {
    const a = validateConfig({ name: 'x' }, schema);
    a.nested.deep = 99;
    expect(validateConfig({ name: 'x' }, schema).nested.deep).toBe(3);
  });

  it('reports every problem at once, each with its path', () => {
    expect(
      problems({
        name: '',
        mode: 'c',
        interval: -1,
        count: 2.5,
        on: 'yes',
        at: 8080,
        argv: ['a', 1],
        nested: [],
        extra: 1,
      }),
    ).toEqual([
      'extra: unknown key (known: name, mode, interval, count, on, at, argv, nested, service)',
      'name: must not be empty',
      'mode: expected one of a, b, got "c"',
      'interval: must be at least 0',
      'count: expected an integer, got 2.5',
      'on: expected true or false, got "yes"',
      'at: expected "HOST:PORT", got 8080',
      'argv[1]: expected a string, got 1',
      'nested: expected an object, got an array',
    ]);
  });

  it('names a missing required key and a document that is not an object', () => {
    expect(problems({})).toEqual(['name: missing']);
    expect(problems([])).toEqual(['the configuration: expected an object, got an array']);
    expect(problems(null)).toEqual(['the configuration: expected an object, got null']);
    expect(problems({ name: 'x', count: 11 })).toEqual(['count: must be at most 10']);
    expect(problems({ name: 'x', at: 'localhost' })[0]).toMatch(/^at: /);
  });

  it('checks service managers by kind', () => {
    expect(
      validateConfig({ name: 'x', service: { kind: 'systemd', unit: 'u.service', user: true } }, schema),
    ).toMatchObject({
      service: { kind: 'systemd', unit: 'u.service', user: true },
    });
    expect(problems({ name: 'x', service: { kind: 'launchd' } })).toEqual(['service.label: required for launchd']);
    expect(problems({ name: 'x', service: { kind: 'systemd' } })).toEqual(['service.unit: required for systemd']);
    expect(problems({ name: 'x', service: { kind: 'command', stop: ['x'] } })).toEqual([
      'service: a command manager needs restart or start',
    ]);
    expect(problems({ name: 'x', service: { kind: 'upstart' } })[0]).toBe(
      'service.kind: expected one of launchd, systemd, command, got "upstart"',
    );
    expect(problems({ name: 'x', service: null })).toEqual(['service: expected an object, got null']);
    expect(problems({ name: 'x', service: 'launchd' })).toEqual(['service: expected an object, got "launchd"']);
  });
});

describe('serviceArgv', () => {
  it('launchd: kickstart -k to restart, bootout to stop, bootstrap (with a plist) or kickstart to start', () => {
    const m = { kind: 'launchd', label: 'org.vigil.guardian' } as const;
    expect(serviceArgv(m, 'restart', 501)).toEqual(['launchctl', 'kickstart', '-k', 'gui/501/org.vigil.guardian']);
    expect(serviceArgv(m, 'stop', 501)).toEqual(['launchctl', 'bootout', 'gui/501/org.vigil.guardian']);
    expect(serviceArgv(m, 'start', 501)).toEqual(['launchctl', 'kickstart', 'gui/501/org.vigil.guardian']);
    expect(serviceArgv({ ...m, plist: '/p.plist', domain: 'system' }, 'start', 501)).toEqual([
      'launchctl',
      'bootstrap',
      'system',
      '/p.plist',
    ]);
  });

  it('systemd: the user manager with --user, else the system one', () => {
    expect(serviceArgv({ kind: 'systemd', unit: 'a.service', user: true }, 'stop', 0)).toEqual([
      'systemctl',
      '--user',
      'stop',
      'a.service',
    ]);
    expect(serviceArgv({ kind: 'systemd', unit: 'a.service' }, 'restart', 0)).toEqual([
      'systemctl',
      'restart',
      'a.service',
    ]);
  });

  it('command: the configured argv, a copy, or null when the action has none', () => {
    const restart = ['node', 'x.js', '--flag'];
    const m = { kind: 'command', restart } as const;
    const argv = serviceArgv(m, 'restart', 0)!;
    expect(argv).toEqual(restart);
    argv.push('changed');
    expect(restart).toHaveLength(3);
    expect(serviceArgv(m, 'stop', 0)).toBeNull();
    expect(serviceArgv({ kind: 'command', start: [] }, 'start', 0)).toBeNull();
  });
});

import { describe, expect, it } from '@jest/globals';
import { INFERENCE_SERVE_OPTIONS } from '@vigil/inference-server/options';
import { GUARDIAN_DEFAULTS } from '@vigil/shared-types';
import { SIGNAL_DAEMON_OPTIONS } from '@vigil/signal-daemon/options';
import { TCP_RELAY_OPTIONS } from '@vigil/tcp-relay/options';
import { normalizeArgv } from '../src/cli.js';
import { envOf, parseStackOptions, STACK_OPTIONS, type StackOptionName } from '../src/config.js';
import { UsageError } from '../src/errors.js';
import { homePaths } from '../src/paths.js';
import { serviceSpecs } from '../src/services.js';

describe('the options of vigil start', () => {
  it("defaults: the ports of DESIGN.md, the local network, the tiny model, the guardian's own 60 s ticks", () => {
    expect(parseStackOptions({}, {})).toEqual({
      account: '+15550000001',
      backend: 'local',
      signalCli: undefined,
      signalCliConfig: undefined,
      daemonHttp: { host: '127.0.0.1', port: 8080 },
      daemonTcp: { host: '127.0.0.1', port: 7583 },
      relay: undefined,
      inference: { host: '127.0.0.1', port: 1337 },
      mtls: { host: '127.0.0.1', port: 1338 },
      daemonMetrics: 'off',
      statusPage: { host: '127.0.0.1', port: 8099 },
      model: undefined,
      modelId: 'vigil',
      threads: undefined,
      guardianInterval: 60,
      healthInterval: 300,
      stopTimeout: 10,
      logMaxMib: 64,
    });
  });

  it('--log-max-mib (VIGIL_LOG_MAX_MIB): a whole number of MiB, at least 1', () => {
    expect(parseStackOptions({}, { VIGIL_LOG_MAX_MIB: '8' }).logMaxMib).toBe(8);
    expect(() => parseStackOptions({ 'log-max-mib': '0' }, {})).toThrow(/--log-max-mib/);
  });

  it('--stop-timeout (VIGIL_STOP_TIMEOUT): seconds, fractions allowed; not a number is refused naming the flag', () => {
    expect(parseStackOptions({}, { VIGIL_STOP_TIMEOUT: '2.5' }).stopTimeout).toBe(2.5);
    expect(parseStackOptions({ 'stop-timeout': '30' }, { VIGIL_STOP_TIMEOUT: '2' }).stopTimeout).toBe(30);
    expect(() => parseStackOptions({ 'stop-timeout': 'soon' }, {})).toThrow(
      /^--stop-timeout: expected a number of seconds/,
    );
  });

  it('a flag wins over its environment variable, which wins over the default', () => {
    const env = { VIGIL_DAEMON_HTTP: '127.0.0.1:9000', VIGIL_MTLS: 'off', VIGIL_HEALTH_INTERVAL: '0' };
    const o = parseStackOptions({ 'daemon-http': '127.0.0.1:9001', relay: '127.0.0.2:7000' }, env);
    expect(o.daemonHttp).toEqual({ host: '127.0.0.1', port: 9001 });
    expect(o.relay).toEqual({ host: '127.0.0.2', port: 7000 });
    expect(o.mtls).toBe('off');
    expect(o.healthInterval).toBe(0);
  });

  it('the guardian ticks at its own default (one default in the repository) unless told otherwise', () => {
    expect(parseStackOptions({ model: '/m.gguf' }, {}).guardianInterval).toBe(GUARDIAN_DEFAULTS.intervalS);
    expect(parseStackOptions({ model: '/m.gguf', 'guardian-interval': '5' }, {}).guardianInterval).toBe(5);
  });

  it('a bad value is a usage error (exit 78) naming the flag', () => {
    const bad = (flags: Record<string, string>) => {
      try {
        parseStackOptions(flags, {});
      } catch (err) {
        expect(err).toBeInstanceOf(UsageError);
        expect((err as UsageError).exitCode).toBe(78);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(bad({ 'daemon-http': 'nope' })).toBe(
      '--daemon-http: invalid port "nope": expected an integer from 0 to 65535',
    );
    expect(bad({ mtls: 'x:y' })).toMatch(/^--mtls: /);
    expect(bad({ backend: 'matrix' })).toBe('--backend: expected one of local, signal-cli, got "matrix"');
    expect(bad({ 'guardian-interval': 'soon' })).toBe('--guardian-interval: expected a number of seconds, got "soon"');
    expect(bad({ 'health-interval': '-1' })).toBe('--health-interval: expected a number of seconds, got "-1"');
  });

  it('every option has its VIGIL_ environment variable', () => {
    for (const flag of Object.keys(STACK_OPTIONS.specs) as StackOptionName[]) {
      expect(envOf(flag)).toBe(`VIGIL_${flag.toUpperCase().replace(/-/g, '_')}`);
    }
  });

  it('`pnpm start -- --flag`: the `--` after start is dropped', () => {
    expect(normalizeArgv(['start', '--', '--home', 'h'])).toEqual(['start', '--home', 'h']);
    expect(normalizeArgv(['--home', 'h', 'start', '--', '--threads', '1'])).toEqual([
      '--home',
      'h',
      'start',
      '--threads',
      '1',
    ]);
    expect(normalizeArgv(['logs', 'guardian'])).toEqual(['logs', 'guardian']);
  });
});

describe("the services' argv, from their own option tables", () => {
  const plan = {
    ...parseStackOptions({ 'daemon-http': '127.0.0.1:9000', mtls: 'off', threads: '2' }, {}),
    relay: { host: '127.0.0.1', port: 7584 },
    relayNote: '',
    modelFile: '/m.gguf',
  };
  const specs = serviceSpecs(plan, homePaths('/h'));
  const flagsOf = (argv: readonly string[]) => argv.filter((a) => a.startsWith('--'));

  it('passes what differs from the service default, and nothing that is its default', () => {
    const daemon = specs['signal-daemon'].argv;
    expect(flagsOf(daemon)).toEqual(['--account', '--http', '--data-dir', '--localnet']);
    expect(daemon[daemon.indexOf('--http') + 1]).toBe('127.0.0.1:9000');
    const inference = specs['inference-server'].argv;
    expect(flagsOf(inference)).toEqual(['--model', '--model-id', '--mtls', '--threads', '--access-log']);
    expect(inference[inference.indexOf('--mtls') + 1]).toBe('off');
    expect(flagsOf(specs['inference-fallback'].argv)).toContain('--gpu');
    // The relay's target is the daemon's TCP default: its own default too.
    expect(flagsOf(specs['tcp-relay'].argv)).toEqual(['--listen']);
    expect(flagsOf(specs.guardian.argv)).toEqual(['--config']);
  });

  it("every flag it passes is one of the service's table", () => {
    const tables = {
      'signal-daemon': SIGNAL_DAEMON_OPTIONS,
      'tcp-relay': TCP_RELAY_OPTIONS,
      'inference-server': INFERENCE_SERVE_OPTIONS,
    } as const;
    for (const [name, table] of Object.entries(tables)) {
      for (const flag of flagsOf(specs[name as keyof typeof tables].argv)) {
        expect(Object.keys(table.specs)).toContain(flag.slice(2));
      }
    }
  });
});

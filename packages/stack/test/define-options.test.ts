/**
 * `defineOptions` (shared-types/node), the one way a vigil binary declares its options, read with
 * a real commander program as every binary reads it.
 */
import { describe, expect, it } from '@jest/globals';
import {
  addOptions,
  defaultsOf,
  defineOptions,
  envOf,
  intFlag,
  listenOption,
  millisOption,
  optionArgv,
  optionProblem,
  readOptions,
} from '@vigil/shared-types/node';
import { Command } from 'commander';

const TABLE = defineOptions('demo', {
  account: { arg: '<number>', short: '-a', help: 'the account', required: true },
  http: { arg: '<addr>', help: 'HTTP listener, or off', ...listenOption, default: { host: '127.0.0.1', port: 8080 } },
  'max-batch': { arg: '<n>', help: 'most requests in a batch', parse: intFlag(1), default: 100 },
  'link-timeout': { arg: '<s>', key: 'linkTimeoutMs', help: 'wait this long', ...millisOption(1), default: 60_000 },
  mode: { arg: '<mode>', help: 'on-start or manual', choices: ['on-start', 'manual'] as const, default: 'on-start' },
  origin: { arg: '<origin>', key: 'origins', help: 'an origin (repeatable)', repeatable: true },
  source: { arg: '<ip>', key: 'sources', help: 'a source (repeatable)', repeatable: true, default: ['127.0.0.2'] },
  'allow-non-loopback': { help: 'allow other addresses' },
});

/** Parses argv with the environment given; returns the values, or what commander wrote and the exit code. */
function parse(argv: string[], env: Record<string, string> = {}) {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  let err = '';
  const cmd = addOptions(new Command('demo'), TABLE)
    .exitOverride()
    .configureOutput({ writeErr: (t) => (err += t), writeOut: (t) => (err += t) });
  try {
    cmd.parse(argv, { from: 'user' });
    return { values: readOptions(cmd, TABLE), err, help: cmd.helpInformation() };
  } catch (e) {
    return { error: e as { exitCode: number; code: string }, err, help: cmd.helpInformation() };
  } finally {
    process.env = saved;
  }
}

describe('defineOptions', () => {
  it('gives typed values: defaults, flags, switches, lists, seconds as milliseconds under their own key', () => {
    expect(parse(['-a', '+1555']).values).toEqual({
      account: '+1555',
      http: { host: '127.0.0.1', port: 8080 },
      maxBatch: 100,
      linkTimeoutMs: 60_000,
      mode: 'on-start',
      origins: [],
      sources: ['127.0.0.2'],
      allowNonLoopback: false,
    });
    const r = parse([
      '-a',
      '+1',
      '--http',
      'off',
      '--max-batch',
      '7',
      '--link-timeout',
      '1.5',
      '--origin',
      'http://a',
      '--origin',
      'http://b',
      '--source',
      '10.0.0.2',
      '--allow-non-loopback',
    ]);
    expect(r.values).toMatchObject({
      http: null,
      maxBatch: 7,
      linkTimeoutMs: 1500,
      origins: ['http://a', 'http://b'],
      sources: ['10.0.0.2'],
      allowNonLoopback: true,
    });
  });

  it('falls back on the environment (BIN_FLAG); a flag wins; a list variable is split on commas and spaces', () => {
    expect(envOf(TABLE, 'max-batch')).toBe('DEMO_MAX_BATCH');
    const r = parse(['--max-batch', '9'], {
      DEMO_ACCOUNT: '+2',
      DEMO_MAX_BATCH: '3',
      DEMO_ORIGIN: 'http://a, http://b',
      DEMO_HTTP: ':9000',
    });
    expect(r.values).toMatchObject({
      account: '+2',
      maxBatch: 9,
      origins: ['http://a', 'http://b'],
      http: { port: 9000 },
    });
  });

  it('refuses a bad value naming the flag (exit 78 through runCli), from the command line or the environment', () => {
    const flag = parse(['-a', '+1', '--max-batch', '0']);
    expect(flag.error?.code).toBe('commander.invalidArgument');
    expect(flag.err).toContain("option '--max-batch <n>' argument '0' is invalid. expected an integer of at least 1");
    const env = parse(['-a', '+1'], { DEMO_HTTP: 'nowhere:x' });
    expect(env.err).toMatch(/--http <addr>.*from env 'DEMO_HTTP' is invalid/);
    expect(parse(['-a', '+1', '--mode', 'later']).error?.code).toBe('commander.invalidArgument');
    expect(parse([]).error?.code).toBe('commander.missingMandatoryOptionValue');
  });

  it('shows every default and variable in the help, as the flag would be written', () => {
    const help = parse(['-a', '+1']).help;
    expect(help).toMatch(/\(default: 127\.0\.0\.1:8080, env:\s+DEMO_HTTP\)/);
    expect(help).toMatch(/wait this long \(default: 60, env:\s+DEMO_LINK_TIMEOUT\)/);
    expect(help).toMatch(/-a, --account <number>\s+the account \(env: DEMO_ACCOUNT\)/);
  });

  it('gives the defaults for a service started in-process, and checks such values as the flags are checked', () => {
    expect(defaultsOf(TABLE)).toEqual({
      http: { host: '127.0.0.1', port: 8080 },
      maxBatch: 100,
      linkTimeoutMs: 60_000,
      mode: 'on-start',
      origins: [],
      sources: ['127.0.0.2'],
      allowNonLoopback: false,
    });
    expect(optionProblem(TABLE, { maxBatch: 5, linkTimeoutMs: 1500 })).toBeUndefined();
    expect(optionProblem(TABLE, { maxBatch: 0 })).toBe('--max-batch: expected an integer of at least 1 (got 0)');
    expect(optionProblem(TABLE, { mode: 'x' })).toBe('--mode: "x" is not one of on-start, manual');
  });

  it('writes the argv that gives values to the binary: only what differs from a default', () => {
    expect(
      optionArgv(TABLE, {
        account: '+1',
        http: { host: '127.0.0.1', port: 8080 },
        linkTimeoutMs: 2500,
        origins: ['x', 'y'],
        allowNonLoopback: true,
      }),
    ).toEqual(['--account', '+1', '--link-timeout', '2.5', '--origin', 'x', '--origin', 'y', '--allow-non-loopback']);
    expect(optionArgv(TABLE, { http: null })).toEqual(['--http', 'off']);
  });
});

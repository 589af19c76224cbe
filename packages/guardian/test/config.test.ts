/** The configuration file: defaults (the spec's numbers), clear errors, paths relative to the file. */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { guardianConfigSchema, z } from '@vigil/shared-types';
import { loadConfig, parseConfig } from '../src/config.js';
import { ConfigFileError } from '../src/errors.js';
import { guardian, tmpDir, writeJson } from './helpers.js';

const tmp = tmpDir();
afterAll(() => tmp.cleanup());

const minimal = { primary: { model: 'tiny', service: { kind: 'launchd', label: 'com.vigil.inference' } } };

describe('configuration', () => {
  it('fills the limits of spec 8 as defaults', () => {
    const c = parseConfig(minimal, '/etc/vigil');
    expect(c).toMatchObject({
      intervalS: 60,
      probeBudgetS: 20,
      busyWindowS: 90,
      failuresBeforeRestart: 2,
      maxRestarts: 3,
      restartWindowS: 300,
      modelListIntervalS: 60,
      canaryIntervalS: 600,
      integrityIntervalS: 300,
      circuitBreakerCauses: 4,
      stateFile: '/etc/vigil/guardian-state.json',
      lockFile: '/etc/vigil/inference-fallback.lock',
    });
    expect(c.primary).toMatchObject({
      agent: 'com.vigil.inference',
      http: { host: '127.0.0.1', port: 1337 },
      codesign: false,
    });
    expect(c.logFile).toBeUndefined();
    expect(c.fallback).toBeUndefined();
  });

  it('resolves relative paths against the configuration file, and gives the fallback the primary address and model', () => {
    const dir = join(tmp.dir, 'etc');
    const file = writeJson(join(dir, 'guardian.json'), {
      stateFile: 'state/g.json',
      logFile: '/var/log/guardian.log',
      primary: { ...minimal.primary, log: 'logs/inference.log', binary: '../bin/inference-server' },
      fallback: { service: { kind: 'systemd', unit: 'vigil-fallback.service', user: true }, accessLog: 'fb.log' },
    });
    const c = loadConfig(file);
    expect(c.stateFile).toBe(join(dir, 'state/g.json'));
    expect(c.logFile).toBe('/var/log/guardian.log');
    expect(c.primary.log).toBe(join(dir, 'logs/inference.log'));
    expect(c.primary.binary).toBe(join(tmp.dir, 'bin/inference-server'));
    expect(c.fallback).toEqual({
      agent: 'vigil-fallback.service',
      http: { host: '127.0.0.1', port: 1337 },
      model: 'tiny',
      service: { kind: 'systemd', unit: 'vigil-fallback.service', user: true },
      accessLog: join(dir, 'fb.log'),
    });
  });

  it('reports every problem at once, with its path: unknown key, wrong type, missing key', () => {
    expect(() =>
      parseConfig(
        {
          intervalS: '60',
          maxRestarts: 2.5,
          primary: { service: { kind: 'systemd' }, htp: '127.0.0.1:1' },
          alerts: {},
        },
        '/',
      ),
    ).toThrow(
      new Error(
        'invalid configuration: primary.htp: unknown key (known: agent, http, mtls, apiKeyFile, model, service, accessLog, log, binary, manifest, codesign, standalone, standaloneTimeoutS); ' +
          'alerts: unknown key (known: intervalS, probeBudgetS, busyWindowS, failuresBeforeRestart, maxRestarts, restartWindowS, modelListIntervalS, canaryIntervalS, integrityIntervalS, circuitBreakerCauses, circuitWindowS, recentLogS, startGraceS, busyCheckS, commandTimeoutS, probePrompt, canaryPrompt, canaryMaxTokens, stateFile, lockFile, logFile, metricsFile, ping, pingTimeoutS, primary, fallback, alert); ' +
          'intervalS: expected a number, got "60"; maxRestarts: expected an integer, got 2.5; ' +
          'primary.model: missing; primary.service.unit: required for systemd',
      ),
    );
  });

  it.each([
    [{ probeBudgetS: 0 }, 'probeBudgetS: must be at least 0.001'],
    [{ primary: { ...minimal.primary, http: 'nonsense:port' } }, 'primary.http: invalid port "port"'],
    [
      { primary: { ...minimal.primary, service: { kind: 'command' } } },
      'primary.service: a command manager needs restart or start',
    ],
    [
      { primary: { ...minimal.primary, service: { kind: 'command', restart: [] } } },
      'primary.service.restart: must not be empty',
    ],
    [{ primary: { ...minimal.primary, manifest: 'm.json' } }, 'primary.manifest: needs primary.binary'],
    [{ alert: { rpc: '127.0.0.1:8080', recipient: [] } }, 'alert.recipient: must not be empty'],
    [{ alert: { recipient: ['+15550000002'] } }, 'alert.rpc: required with alert.recipient'],
    [
      { fallback: { agent: 'com.vigil.inference', service: { kind: 'launchd', label: 'x' } } },
      'fallback.agent: must differ from the primary agent',
    ],
    [
      { fallback: { service: { kind: 'upstart' } } },
      'fallback.service.kind: expected one of launchd, systemd, command, got "upstart"',
    ],
  ])('refuses %j', (over, problem) => {
    expect(() => parseConfig({ ...minimal, ...over }, '/')).toThrow(problem);
  });

  it('names the file and the reason when the file is missing, a directory, or not JSON', () => {
    expect(() => loadConfig(join(tmp.dir, 'nope.json'))).toThrow(
      new ConfigFileError(join(tmp.dir, 'nope.json'), 'cannot read the configuration: no such file'),
    );
    mkdirSync(join(tmp.dir, 'adir'), { recursive: true });
    expect(() => loadConfig(join(tmp.dir, 'adir'))).toThrow('is a directory, not a file');
    writeFileSync(join(tmp.dir, 'bad.json'), '{"intervalS": 60,');
    expect(() => loadConfig(join(tmp.dir, 'bad.json'))).toThrow(/bad\.json: not valid JSON: /);
  });
});

describe('the README', () => {
  it('lists every key of the configuration schema, with its default', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Configuration'), readme.indexOf('\n## Files'));
    const rows = new Map(
      [...section.matchAll(/^\| `([\w.]+)` \| ([^|]*) \|/gm)].map((m) => [m[1]!, m[2]!.trim()] as const),
    );
    const shape = (s: z.ZodType): Record<string, z.ZodType> =>
      s instanceof z.ZodOptional ? shape(s.unwrap() as z.ZodType) : (s as z.ZodObject).shape;
    const top = shape(guardianConfigSchema().in as z.ZodType);
    const keys = Object.keys(top).flatMap((k) =>
      ['primary', 'fallback', 'alert'].includes(k) ? [k, ...Object.keys(shape(top[k]!)).map((n) => `${k}.${n}`)] : [k],
    );
    expect(keys.filter((k) => !rows.has(k))).toEqual([]);
    const c = parseConfig({ ...minimal, alert: { rpc: '127.0.0.1:8080', recipient: ['+1'] } }, '/');
    const defaults: Record<string, unknown> = {
      ...c,
      ...Object.fromEntries(Object.entries(c.primary).map(([k, v]) => [`primary.${k}`, v])),
      ...Object.fromEntries(Object.entries(c.alert!).map(([k, v]) => [`alert.${k}`, v])),
    };
    for (const key of keys) {
      const d = defaults[key];
      if (typeof d === 'number' || typeof d === 'boolean') expect(`${key}: ${rows.get(key)}`).toBe(`${key}: ${d}`);
      if (typeof d === 'string' && key !== 'primary.model' && key !== 'primary.agent') {
        expect(`${key}: ${rows.get(key)}`).toContain(d.replace(/^\//, ''));
      }
    }
  });
});

describe('configuration errors on the command line', () => {
  it('exits 78 with one clear line for every subcommand and a missing file', async () => {
    for (const cmd of ['run', 'tick', 'status', 'restore', 'reset', 'check-integrity']) {
      const r = await guardian([cmd, '--config', join(tmp.dir, 'missing.json')]);
      expect(r).toEqual({
        code: 78,
        stdout: '',
        stderr: `guardian: ${join(tmp.dir, 'missing.json')}: cannot read the configuration: no such file\n`,
      });
    }
  });

  it('exits 78 for an invalid file, for a missing --config, and takes GUARDIAN_CONFIG from the environment', async () => {
    const file = writeJson(join(tmp.dir, 'invalid.json'), { ...minimal, intervalS: -1 });
    const r = await guardian(['tick', '-c', file]);
    expect(r.code).toBe(78);
    expect(r.stderr).toBe(`guardian: ${file}: invalid configuration: intervalS: must be at least 0\n`);
    const none = await guardian(['status']);
    expect(none.code).toBe(78);
    expect(none.stderr).toContain("required option '-c, --config <file>' not specified");
    const env = await guardian(['status'], { GUARDIAN_CONFIG: file });
    expect(env.stderr).toBe(r.stderr);
  });

  it('exits 78 with usage when no subcommand is given', async () => {
    const r = await guardian([]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('Usage: guardian');
    expect(r.stderr).toContain('check-integrity');
  });

  it('exits 78 when check-integrity has no binary to check', async () => {
    const file = writeJson(join(tmp.dir, 'nobinary.json'), { ...minimal, stateFile: join(tmp.dir, 'nb-state.json') });
    const r = await guardian(['check-integrity', '-c', file]);
    expect(r).toMatchObject({
      code: 78,
      stderr: 'guardian: primary.binary is not configured: there is nothing to check\n',
    });
  });
});

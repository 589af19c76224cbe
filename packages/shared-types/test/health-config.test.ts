import { describe, expect, it } from '@jest/globals';
import { besideFile, ConfigValidationError, healthConfigSchema, validateConfig } from '../src/index.js';

const schema = healthConfigSchema('/state/vigil');

describe('healthConfigSchema', () => {
  it('every default from the schema: the vigil ports, the health log in the state directory, the lock beside it', () => {
    expect(validateConfig({}, schema)).toEqual({
      daemon: { http: { host: '127.0.0.1', port: 8080 }, program: 'signal-daemon', processMatch: [] },
      retiredPorts: [18081, 18082],
      outbound: { maxAgeHours: 24 },
      pingTimeoutS: 10,
      healthLog: '/state/vigil/health.log',
      lockFile: '/state/vigil/health-check.lock',
      timeouts: { checkMs: 3000, fixMs: 15000, runMs: 30000 },
    });
  });

  it('nested defaults of what is configured; an explicit lock file is kept', () => {
    const c = validateConfig(
      { gateway: {}, outbound: { probe: { noteToSelf: true } }, healthLog: 'h.log', lockFile: '/l' },
      schema,
    );
    expect(c.gateway).toEqual({
      address: { host: '127.0.0.1', port: 4077 },
      storm: { pattern: 'websocket (connected|opened|connection)', threshold: 30, windowMinutes: 15 },
    });
    expect(c.outbound.probe).toEqual({ noteToSelf: true, message: 'vigil health check' });
    expect(c.lockFile).toBe('/l');
    expect(validateConfig({ healthLog: 'h.log' }, schema).lockFile).toBe('health-check.lock');
  });

  it('names the key of every problem, in one message naming the file', () => {
    let error: unknown;
    try {
      validateConfig(
        {
          deamon: {},
          daemon: { http: 'localhost', processMatch: [''] },
          relay: {},
          retiredPorts: [0, 70000],
          gateway: { storm: { pattern: '(', threshold: 1.5 } },
          outbound: { probe: { message: 'x' } },
          timeouts: { checkMs: 'fast' },
        },
        schema,
      );
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigValidationError);
    expect((error as ConfigValidationError).problems).toEqual([
      'deamon: unknown key (known: daemon, relay, retiredPorts, gateway, flowConfig, outbound, healthLog, lockFile, ping, pingTimeoutS, alert, timeouts)',
      expect.stringMatching(/^daemon\.http: /),
      'daemon.processMatch[0]: must not be empty',
      'relay.link: missing',
      'retiredPorts[0]: must be at least 1',
      'retiredPorts[1]: must be at most 65535',
      expect.stringMatching(/^gateway\.storm\.pattern: .*regular expression/i),
      'gateway.storm.threshold: expected an integer, got 1.5',
      'outbound.probe: set recipient or noteToSelf',
      'timeouts.checkMs: expected a number, got "fast"',
    ]);
    expect(() => validateConfig({ lockFile: 3 }, schema, '/etc/vigil/health.json')).toThrow(
      '/etc/vigil/health.json: invalid configuration: lockFile: expected a string, got 3',
    );
  });

  it('besideFile is path.join(dirname(file), name)', () => {
    expect(besideFile('/a/b/health.log', 'x')).toBe('/a/b/x');
    expect(besideFile('/health.log', 'x')).toBe('/x');
    expect(besideFile('health.log', 'x')).toBe('x');
    expect(besideFile('rel/health.log', 'x')).toBe('rel/x');
  });
});

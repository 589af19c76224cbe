/**
 * Nagios output, the dead-man's-switch pings and the webhook alert of real health-check runs
 * (the built binary) against a real daemon, with a local HTTP server standing for healthchecks.io
 * and the webhook.
 */
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { freePort, healthCheck, Lab } from './helpers.js';

interface Seen {
  method: string;
  url: string;
  body: string;
}

let lab: Lab;
let server: Server;
let base = '';
let seen: Seen[] = [];
let hookStatus = 200;
let hookBody = 'OK';

beforeAll(async () => {
  lab = await Lab.create();
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, body });
      res.statusCode = req.url === '/hook' ? hookStatus : 200;
      res.end(req.url === '/hook' ? hookBody : 'OK');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await lab.cleanup();
});

const requests = () => seen.map((r) => `${r.method} ${r.url}`);
const hooks = () => seen.filter((r) => r.url === '/hook').map((r) => JSON.parse(r.body));
const NAGIOS = /^VIGIL (OK|WARNING|CRITICAL|UNKNOWN) - ([^|\n]+) \| (\S+(?: \S+)*)\n$/;

/** Every perfdata item, `label=value[UOM];warn;crit;min;max`, as label → value. */
function perfdata(line: string): Record<string, string> {
  const items = NAGIOS.exec(line)![3]!.split(' ');
  for (const item of items) expect(item).toMatch(/^[a-z_]+=(?:[0-9]+(?:ms)?|U)(?:;[0-9]*){0,4}$/);
  return Object.fromEntries(items.map((i) => i.split(';')[0]!.split('=') as [string, string]));
}

describe('Nagios output, pings and the webhook alert', () => {
  it('follows an episode: CRITICAL with one alert, WARNING once healed with `resolved`, OK; pings start then the exit', async () => {
    const config = lab.writeConfig({
      ...lab.baseConfig(),
      ping: `${base}/p/abc`,
      alert: { webhook: { url: `${base}/hook`, headers: { 'X-Token': 't' } } },
    });

    // The daemon is not running: a person is needed.
    seen = [];
    let r = await healthCheck(['--nagios', '--config', config]);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(NAGIOS);
    expect(r.stdout).toMatch(
      /^VIGIL CRITICAL - manual intervention required: signal_port: JSON-RPC version on 127\.0\.0\.1:\d+ failed/,
    );
    const perf = perfdata(r.stdout);
    expect(perf).toMatchObject({ signal_port: '2', relay_link: 'U', gateway_plugin: 'U', outbound_send: 'U' });
    expect(Object.keys(perf)).toContain('signal_port_ms');
    expect(requests()[0]).toBe('GET /p/abc/start');
    expect(requests().slice(1).sort()).toEqual(['GET /p/abc/2', 'POST /hook']);
    const [alert] = hooks();
    expect(alert).toMatchObject({
      source: 'vigil',
      service: 'health-check',
      event: 'manual_intervention',
      detail: expect.stringMatching(/^manual intervention required: signal_port failed: JSON-RPC version/),
      output: {
        exitCode: 2,
        checks: expect.arrayContaining([expect.objectContaining({ name: 'signal_port', status: 'failed' })]),
      },
    });
    expect(lab.reports().at(-1)!.notifications).toEqual([
      { what: 'ping start', ok: true, detail: `${base}/p/abc/start: HTTP 200` },
      { what: 'ping 2', ok: true, detail: `${base}/p/abc/2: HTTP 200` },
      { what: 'webhook manual_intervention', ok: true, detail: `${base}/hook: HTTP 200` },
    ]);

    // Still down five minutes later: pinged, not alerted again.
    seen = [];
    r = await healthCheck(['--quiet', '--config', config]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: '' });
    expect(requests()).toEqual(['GET /p/abc/start', 'GET /p/abc/2']);

    // --fix brings the daemon back: WARNING (exit 1), and the episode is resolved.
    const healing = lab.writeConfig(
      {
        ...JSON.parse(readFileSync(config, 'utf8')),
        daemon: { ...lab.baseConfig().daemon, service: lab.launcher(lab.daemonArgv()) },
      },
      'healing.json',
    );
    seen = [];
    r = await healthCheck(['--fix', '--nagios', '--config', healing]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^VIGIL WARNING - healed: signal_port: restart the daemon through command \| /);
    expect(perfdata(r.stdout).signal_port).toBe('1');
    expect(requests()[0]).toBe('GET /p/abc/start');
    expect(requests().slice(1).sort()).toEqual(['GET /p/abc/1', 'POST /hook']);
    expect(hooks()[0]).toMatchObject({
      event: 'resolved',
      detail: expect.stringMatching(/^healed again \(exit 1\); a person was needed since /),
    });

    // Healthy: OK, the bare URL, no alert.
    seen = [];
    r = await healthCheck(['--nagios', '--config', config]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^VIGIL OK - 2 checks ok, 5 skipped \(not configured\) \| signal_port=0;1;2;0;2 signal_port_ms=\d+ms;;;0 /,
    );
    expect(requests()).toEqual(['GET /p/abc/start', 'GET /p/abc']);
  });

  it('UNKNOWN (exit 3) when the check cannot run, pinging /3 when --ping says where', async () => {
    const bad = lab.writeConfig('{"daemon": {"htp": 1}}', 'bad.json');
    seen = [];
    let r = await healthCheck(['--nagios', '--ping', `${base}/p/x`, '--config', bad]);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(
      /^VIGIL UNKNOWN - the check could not run: .*bad\.json: invalid configuration: daemon\.htp: unknown key/,
    );
    expect(r.stdout.split('\n')).toHaveLength(2);
    expect(requests()).toEqual(['GET /p/x/3']);
    r = await healthCheck(['--nagios', '--json']);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(
      /^VIGIL UNKNOWN - the check could not run: option '--json' cannot be used with option '--nagios'\n$/,
    );
    r = await healthCheck(['--ping', 'ftp://x/y']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('expected an http:// or https:// URL, got "ftp://x/y"');
  });

  it('a webhook or ping that fails is reported and changes nothing else; the next run delivers the alert', async () => {
    const down = await freePort(); // no daemon here: exit 2
    const deadPing = await freePort();
    const cfg = (hook: string) => ({
      ...lab.baseConfig(),
      daemon: { http: `127.0.0.1:${down}`, processMatch: lab.processMatch },
      healthLog: lab.path('other/health.log'),
      ping: `http://127.0.0.1:${deadPing}/p`,
      pingTimeoutS: 1,
      alert: { webhook: { url: hook, timeoutS: 2 } },
    });
    hookStatus = 500;
    seen = [];
    const config = lab.writeConfig(cfg(`${base}/hook`), 'other.json');
    const r = await healthCheck(['--json', '--config', config]);
    expect(r.code).toBe(2);
    const report = JSON.parse(r.stdout);
    expect(report.exitCode).toBe(2);
    expect(report.notifications).toEqual([
      { what: 'ping start', ok: false, detail: expect.stringMatching(/ECONNREFUSED/) },
      { what: 'ping 2', ok: false, detail: expect.stringMatching(/ECONNREFUSED/) },
      { what: 'webhook manual_intervention', ok: false, detail: `${base}/hook: 3 tries, last: HTTP 500: OK` },
    ]);
    expect(r.stderr).toMatch(/^health-check: webhook manual_intervention failed: .*HTTP 500/m);
    expect(requests()).toEqual(['POST /hook', 'POST /hook', 'POST /hook']);
    // The webhook answers again: the next run of the same episode delivers the alert, once.
    hookStatus = 200;
    seen = [];
    expect((await healthCheck(['--quiet', '--config', config])).code).toBe(2);
    expect((await healthCheck(['--quiet', '--config', config])).code).toBe(2);
    expect(hooks().map((h) => h.event)).toEqual(['manual_intervention']);
  });

  it('prints what a webhook answered with its control characters escaped; refuses a symlinked log directory', async () => {
    hookStatus = 500;
    hookBody = '\x1b]0;owned\x07\x1b[2J\x1b[31mdown';
    try {
      const config = lab.writeConfig(
        {
          ...lab.baseConfig(),
          daemon: { http: `127.0.0.1:${await freePort()}`, processMatch: lab.processMatch },
          healthLog: lab.path('hostile/health.log'),
          alert: { webhook: { url: `${base}/hook`, timeoutS: 2 } },
        },
        'hostile.json',
      );
      const r = await healthCheck(['--config', config]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('HTTP 500: \\x1b]0;owned\\x07\\x1b[2J\\x1b[31mdown');
      expect(r.stderr).not.toContain('\x1b');
      expect(r.stderr).not.toContain('\x07');
    } finally {
      hookStatus = 200;
      hookBody = 'OK';
    }
    // A health log whose directory is a link (into another user's directory) is not written through.
    const victim = lab.path('victim');
    mkdirSync(victim);
    symlinkSync(victim, lab.path('linked'));
    const config = lab.writeConfig({ ...lab.baseConfig(), healthLog: lab.path('linked/health.log') }, 'linked.json');
    const r = await healthCheck(['--json', '--config', config]);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('is a symbolic link');
    expect(readdirSync(victim)).toEqual([]);
  });

  it('sends nothing anywhere when nothing is configured', async () => {
    seen = [];
    const r = await healthCheck(['--json', '--config', lab.writeConfig(lab.baseConfig(), 'plain.json')]);
    expect(JSON.parse(r.stdout).notifications).toBeUndefined();
    expect(seen).toEqual([]);
  });
});

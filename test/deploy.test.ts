import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { parseConfig } from '../packages/guardian/src/config.js';
import { resolveConfig } from '../packages/health-check/src/config.js';
import { INFERENCE_HTTP } from '../packages/shared-types/src/index.js';
import { INSTALLED_SERVICES, labelOf, unitOf } from '../packages/stack/src/status-page/managers.js';

const root = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
/** The documented entry point: a launcher of `vigil install|uninstall`. */
const INSTALL = join(root, 'deploy', 'install');
const VIGIL = join(root, 'packages', 'stack', 'bin', 'vigil.js');
/** `vigil install ARGS`, or `vigil uninstall ARGS` when ARGS start with "uninstall". */
const vigil = (args: string[]) => (args[0] === 'uninstall' ? [VIGIL, ...args] : [VIGIL, 'install', ...args]);
const uid = process.getuid?.() ?? 0;
const scratch = mkdtempSync(join(tmpdir(), 'vigil-deploy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let n = 0;
const freshDir = (name: string) => {
  const dir = join(scratch, `${name}-${++n}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

// ---- a plist reader for the subset launchd agents use ----------------------------------------

type PlistValue = string | number | boolean | PlistValue[] | { [key: string]: PlistValue };

/** Parses an XML property list (dict, array, key, string, integer, real, true, false). */
export function parsePlist(xml: string): PlistValue {
  let i = 0;
  const fail = (msg: string): never => {
    throw new Error(`plist: ${msg} at offset ${i}`);
  };
  const skipMisc = () => {
    for (;;) {
      i += /^\s*/.exec(xml.slice(i))![0].length;
      if (xml.startsWith('<?', i)) {
        const end = xml.indexOf('?>', i);
        if (end < 0) fail('unterminated processing instruction');
        i = end + 2;
      } else if (xml.startsWith('<!--', i)) {
        const end = xml.indexOf('-->', i + 4);
        if (end < 0) fail('unterminated comment');
        if (xml.slice(i + 4, end).includes('--')) fail('"--" inside a comment (not well-formed XML)');
        i = end + 3;
      } else if (xml.startsWith('<!DOCTYPE', i)) {
        const end = xml.indexOf('>', i);
        if (end < 0) fail('unterminated DOCTYPE');
        i = end + 1;
      } else {
        return;
      }
    }
  };
  const decode = (raw: string) =>
    raw.replace(/&(#x[0-9a-fA-F]+|#\d+|[a-z]+);|&/g, (m, e: string | undefined) => {
      if (e === undefined) return fail('a bare "&"');
      if (e.startsWith('#x')) return String.fromCodePoint(Number.parseInt(e.slice(2), 16));
      if (e.startsWith('#')) return String.fromCodePoint(Number(e.slice(1)));
      const named: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
      return named[e] ?? fail(`unknown entity ${m}`);
    });
  const tag = () => {
    skipMisc();
    const m = /^<(\/?)([A-Za-z]+)((?:\s+[A-Za-z]+="[^"]*")*)\s*(\/?)>/.exec(xml.slice(i));
    if (!m) return fail('expected a tag');
    i += m[0].length;
    return { close: m[1] === '/', name: m[2]!, empty: m[4] === '/' };
  };
  const text = (name: string) => {
    const end = xml.indexOf(`</${name}>`, i);
    if (end < 0) fail(`no </${name}>`);
    const raw = xml.slice(i, end);
    if (raw.includes('<')) fail(`markup inside <${name}>`);
    i = end + name.length + 3;
    return decode(raw);
  };
  const value = (t: { close: boolean; name: string; empty: boolean }): PlistValue => {
    if (t.close) return fail(`unexpected </${t.name}>`);
    switch (t.name) {
      case 'string':
        return t.empty ? '' : text('string');
      case 'integer': {
        const s = text('integer').trim();
        return /^-?\d+$/.test(s) ? Number(s) : fail(`bad integer "${s}"`);
      }
      case 'real': {
        const s = text('real').trim();
        return Number.isFinite(Number(s)) ? Number(s) : fail(`bad real "${s}"`);
      }
      case 'true':
      case 'false':
        return t.empty ? t.name === 'true' : fail(`<${t.name}> must be empty`);
      case 'array': {
        const out: PlistValue[] = [];
        if (t.empty) return out;
        for (;;) {
          const next = tag();
          if (next.close) return next.name === 'array' ? out : fail(`</${next.name}> closes an array`);
          out.push(value(next));
        }
      }
      case 'dict': {
        const out: Record<string, PlistValue> = {};
        if (t.empty) return out;
        for (;;) {
          const k = tag();
          if (k.close) return k.name === 'dict' ? out : fail(`</${k.name}> closes a dict`);
          if (k.name !== 'key') fail(`expected <key>, got <${k.name}>`);
          const key = text('key');
          if (key in out) fail(`duplicate key ${key}`);
          out[key] = value(tag());
        }
      }
      default:
        return fail(`unsupported element <${t.name}>`);
    }
  };
  const open = tag();
  if (open.close || open.name !== 'plist') fail('expected <plist>');
  const result = value(tag());
  const close = tag();
  if (!close.close || close.name !== 'plist') fail('expected </plist>');
  skipMisc();
  if (i !== xml.length) fail('content after </plist>');
  return result;
}

// ---- fakes of the service managers (they record exact argv) ----------------------------------

const fakeBin = freshDir('bin');
writeFileSync(
  join(fakeBin, 'launchctl'),
  `#!/usr/bin/env node
// A stand-in for launchctl: records argv; keeps the set of loaded labels in a file.
const fs = require('node:fs');
const path = require('node:path');
const dir = process.env.FAKE_STATE;
const args = process.argv.slice(2);
fs.appendFileSync(path.join(dir, 'calls'), JSON.stringify(['launchctl', ...args]) + '\\n');
const file = path.join(dir, 'loaded');
const loaded = new Set(fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\\n').filter(Boolean) : []);
const save = () => fs.writeFileSync(file, [...loaded].join('\\n'));
const label = (target) => target.split('/').pop();
if (args[0] === 'print') process.exit(loaded.has(label(args[1])) ? 0 : 113);
if (args[0] === 'bootout') {
  if (!loaded.delete(label(args[1]))) { process.stderr.write('Boot-out failed: 3: No such process\\n'); process.exit(3); }
  save();
  process.exit(0);
}
if (args[0] === 'bootstrap') {
  const l = path.basename(args[2], '.plist');
  if (loaded.has(l)) { process.stderr.write('Bootstrap failed: 5: Input/output error\\n'); process.exit(5); }
  loaded.add(l);
  save();
  process.exit(0);
}
process.exit(64);
`,
);
writeFileSync(
  join(fakeBin, 'systemctl'),
  `#!/usr/bin/env node
require('node:fs').appendFileSync(require('node:path').join(process.env.FAKE_STATE, 'calls'),
  JSON.stringify(['systemctl', ...process.argv.slice(2)]) + '\\n');
`,
);
chmodSync(join(fakeBin, 'launchctl'), 0o755);
chmodSync(join(fakeBin, 'systemctl'), 0o755);

interface Command {
  argv: string[];
  kind: 'run' | 'check' | 'if-not-loaded';
  mayFail?: boolean;
  rc?: number;
}
interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
  plan: {
    locations: Record<'home' | 'config' | 'state' | 'data' | 'logs' | 'units' | 'pki', string>;
    files: { path: string; action: string; mode?: string }[];
    commands: Command[];
    notes: string[];
    validated?: string[];
    failed: number;
  };
  calls: string[][];
}

/** Runs vigil install (or uninstall) with the fakes first on PATH; `state` holds their records. */
function install(args: string[], state = freshDir('fake')): Result {
  const callsFile = join(state, 'calls');
  rmSync(callsFile, { force: true });
  const r = spawnSync(process.execPath, [...vigil(args), '--json'], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${fakeBin}:${process.env.PATH}`, FAKE_STATE: state },
  });
  const calls = existsSync(callsFile)
    ? readFileSync(callsFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as string[])
    : [];
  let plan = {} as Result['plan'];
  if (r.status !== 78) {
    try {
      plan = JSON.parse(r.stdout) as Result['plan'];
    } catch {
      throw new Error(`install printed no JSON (exit ${r.status}): ${r.stdout}${r.stderr}`);
    }
  }
  return { code: r.status, stdout: r.stdout, stderr: r.stderr, plan, calls };
}

const model = join(freshDir('model'), 'tiny.gguf');
writeFileSync(model, 'GGUF');
/** A temporary home with the model given and no certificates: nothing but the units to make. */
const base = (platform: 'launchd' | 'systemd', prefix = freshDir(platform)) => [
  '--node',
  process.execPath,
  '--platform',
  platform,
  '--prefix',
  prefix,
  '--model',
  model,
  '--no-mtls',
];

const argvs = (commands: Command[]) => commands.map((c) => c.argv);
const plistOf = (path: string) => parsePlist(readFileSync(path, 'utf8')) as Record<string, PlistValue>;
const after = (argv: readonly PlistValue[] | readonly string[], flag: string) => argv[argv.indexOf(flag) + 1];

/** The keys of a launchd.plist(5) this project uses, and their types. */
const LAUNCHD_KEYS: Record<string, string> = {
  Label: 'string',
  ProgramArguments: 'array',
  WorkingDirectory: 'string',
  RunAtLoad: 'boolean',
  KeepAlive: 'boolean',
  StartInterval: 'number',
  ThrottleInterval: 'number',
  ExitTimeOut: 'number',
  ProcessType: 'string',
  Umask: 'number',
  StandardOutPath: 'string',
  StandardErrorPath: 'string',
};

describe('the plist reader', () => {
  it('reads the subset and refuses what is not well formed', () => {
    const doc = (body: string) =>
      `<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "x">\n<plist version="1.0">${body}</plist>\n`;
    expect(
      parsePlist(
        doc(
          '<dict><key>a</key><string>x &amp; y</string><key>b</key><array><integer>3</integer><true/></array></dict>',
        ),
      ),
    ).toEqual({ a: 'x & y', b: [3, true] });
    expect(() => parsePlist(doc('<dict><key>a</key></dict>'))).toThrow();
    expect(() => parsePlist(doc('<dict><key>a</key><string>1</string><key>a</key><string>2</string></dict>'))).toThrow(
      /duplicate/,
    );
    expect(() => parsePlist(`<!-- a -- b -->${doc('<dict/>')}`)).toThrow(/inside a comment/);
    expect(() => parsePlist(doc('<dict><key>a</key><string>x & y</string></dict>'))).toThrow(/bare/);
  });
});

/** The binary a service runs: its package's; the status page is `vigil status-page`. */
const binaryOf = (service: string) =>
  service === 'status-page'
    ? join(root, 'packages', 'stack', 'bin', 'vigil.js')
    : join(root, 'packages', service, 'bin', `${service}.js`);

describe('vigil install for launchd', () => {
  const prefix = freshDir('launchd');
  const r = install(['--no-load', ...base('launchd', prefix)]);
  const loc = r.plan.locations;
  const agents = join(prefix, 'Library', 'LaunchAgents');
  const labels = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page', 'health-check'].map(
    (s) => `org.vigil.${s}`,
  );
  const fallbackPlist = join(loc.config, 'launchd', 'org.vigil.inference-fallback.plist');
  const plists = () =>
    Object.fromEntries(
      [...labels.map((l) => join(agents, `${l}.plist`)), fallbackPlist].map((p) => [basename(p, '.plist'), plistOf(p)]),
    );

  it('writes a plist per service and the two configurations, and runs nothing with --no-load', () => {
    expect(r.code).toBe(0);
    expect(r.calls).toEqual([]);
    expect(r.plan.files.map((f) => [f.path, f.action, f.mode])).toEqual([
      ...labels.slice(0, 3).map((l) => [join(agents, `${l}.plist`), 'create', '0644']),
      [fallbackPlist, 'create', '0644'],
      ...labels.slice(3).map((l) => [join(agents, `${l}.plist`), 'create', '0644']),
      [join(loc.config, 'guardian.json'), 'create', '0600'],
      [join(loc.config, 'health.json'), 'create', '0600'],
    ]);
    expect(readdirSync(agents).sort()).toEqual(labels.map((l) => `${l}.plist`).sort());
    expect(statSync(join(loc.config, 'guardian.json')).mode & 0o777).toBe(0o600);
    expect(loc.logs).toBe(join(prefix, 'Library', 'Logs', 'vigil'));
  });

  it('runs the status page with --restart-with launchd, and its labels are the installed ones', () => {
    const argv = plists()['org.vigil.status-page']!.ProgramArguments as string[];
    expect(argv.slice(argv.indexOf('--restart-with'))).toEqual(['--restart-with', 'launchd']);
    expect(INSTALLED_SERVICES.map(labelOf).sort()).toEqual(Object.keys(plists()).sort());
  });

  it('every plist parses, uses known keys, and runs node on the package binary that exists in the checkout', () => {
    for (const [label, p] of Object.entries(plists())) {
      expect(p.Label).toBe(label);
      for (const [key, v] of Object.entries(p)) {
        expect([key, LAUNCHD_KEYS[key]]).toEqual([key, Array.isArray(v) ? 'array' : typeof v]);
      }
      const argv = p.ProgramArguments as string[];
      expect(argv[0]).toBe(process.execPath);
      const pkg = label.replace('org.vigil.', '').replace('inference-fallback', 'inference-server');
      expect(argv[1]).toBe(binaryOf(pkg));
      expect(existsSync(argv[1]!)).toBe(true);
      expect(argv.join(' ')).not.toMatch(/@[A-Z_]+@/);
      expect(dirname(p.StandardOutPath as string)).toBe(loc.logs);
      expect(p.StandardErrorPath).toBe(p.StandardOutPath);
    }
  });

  it('gives every agent an ExitTimeOut: what SIGTERM does not end (kickstart -k, bootout) is killed after it', () => {
    for (const f of r.plan.files.filter((x) => x.path.endsWith('.plist'))) {
      expect([basename(f.path), plistOf(f.path).ExitTimeOut]).toEqual([basename(f.path), expect.any(Number)]);
      expect(plistOf(f.path).ExitTimeOut as number).toBeGreaterThan(10);
    }
  });

  it('keeps the services alive, runs the guardian as a one-tick job every 60 s and the health check every 300 s', () => {
    const p = plists();
    for (const l of ['signal-daemon', 'tcp-relay', 'inference-server', 'inference-fallback']) {
      expect([l, p[`org.vigil.${l}`]!.KeepAlive, p[`org.vigil.${l}`]!.RunAtLoad]).toEqual([l, true, true]);
    }
    const guardian = p['org.vigil.guardian']!;
    // Exit 2 is final: nothing respawns a StartInterval job; the state file answers the next tick.
    expect(guardian.KeepAlive).toBe(false);
    expect(guardian.StartInterval).toBe(60);
    expect((guardian.ProgramArguments as string[]).slice(2)).toEqual([
      'tick',
      '--config',
      join(loc.config, 'guardian.json'),
    ]);
    const health = p['org.vigil.health-check']!;
    expect(health.StartInterval).toBe(300);
    expect((health.ProgramArguments as string[]).slice(2)).toEqual([
      '--fix',
      '--quiet',
      '--config',
      join(loc.config, 'health.json'),
    ]);
  });

  it('keeps the fallback out of LaunchAgents, on the primary address with the GPU off', () => {
    const p = plists();
    expect(existsSync(join(agents, 'org.vigil.inference-fallback.plist'))).toBe(false);
    const primary = p['org.vigil.inference-server']!.ProgramArguments as string[];
    const fallback = p['org.vigil.inference-fallback']!.ProgramArguments as string[];
    expect(after(primary, '--http')).toBe(`${INFERENCE_HTTP.host}:${INFERENCE_HTTP.port}`);
    expect(after(fallback, '--http')).toBe(after(primary, '--http'));
    expect([after(primary, '--gpu'), after(fallback, '--gpu')]).toEqual(['auto', 'off']);
    expect(after(fallback, '--access-log')).not.toBe(after(primary, '--access-log'));
  });

  it('writes a guardian configuration that parseConfig accepts, naming these agents, logs and files', () => {
    const raw = JSON.parse(readFileSync(join(loc.config, 'guardian.json'), 'utf8'));
    const g = parseConfig(raw, loc.config);
    const p = plists();
    const primary = p['org.vigil.inference-server']!;
    const fallback = p['org.vigil.inference-fallback']!;
    expect(g.primary.service).toEqual({
      kind: 'launchd',
      label: 'org.vigil.inference-server',
      plist: join(agents, 'org.vigil.inference-server.plist'),
    });
    expect(g.fallback?.service).toEqual({
      kind: 'launchd',
      label: 'org.vigil.inference-fallback',
      plist: fallbackPlist,
    });
    expect(g.primary.log).toBe(primary.StandardOutPath);
    expect(g.primary.accessLog).toBe(after(primary.ProgramArguments as string[], '--access-log'));
    expect(g.fallback?.accessLog).toBe(after(fallback.ProgramArguments as string[], '--access-log'));
    expect(g.primary.model).toBe('tiny');
    expect(g.primary.binary).toBe((primary.ProgramArguments as string[])[1]);
    expect(g.lockFile).toBe(join(loc.state, 'inference-fallback.lock'));
    expect(g.stateFile).toBe(join(loc.state, 'guardian-state.json'));
    expect(dirname(g.logFile!)).toBe(loc.logs);
  });

  it('writes a health-check configuration that resolveConfig accepts, relaunching the daemon as launchd runs it', () => {
    const h = resolveConfig(JSON.parse(readFileSync(join(loc.config, 'health.json'), 'utf8')));
    const p = plists();
    expect(h.daemon.service).toEqual({ kind: 'launchd', label: 'org.vigil.signal-daemon' });
    expect(h.daemon.relaunch).toEqual(p['org.vigil.signal-daemon']!.ProgramArguments);
    expect(h.daemon.log).toBe(p['org.vigil.signal-daemon']!.StandardOutPath);
    expect(h.daemon.processMatch).toEqual(['+15550000001']);
    expect(h.relay?.service).toEqual({ kind: 'launchd', label: 'org.vigil.tcp-relay' });
    expect(`${h.relay?.link.host}:${h.relay?.link.port}`).toBe(
      after(p['org.vigil.tcp-relay']!.ProgramArguments as string[], '--listen'),
    );
    expect(h.healthLog).toBe(join(loc.state, 'health.log'));
  });

  it('validated both configurations with the packages own validators when they are built', () => {
    if (!existsSync(join(root, 'packages/guardian/dist/config.js'))) {
      console.log('packages are not built: install could not validate the configurations itself');
      return;
    }
    expect(r.plan.validated).toEqual([join(loc.config, 'guardian.json'), join(loc.config, 'health.json')]);
  });

  it('also parses with python plistlib where python3 is installed', () => {
    const script = 'import plistlib,sys\nfor f in sys.argv[1:]: plistlib.load(open(f,"rb"))';
    const py = spawnSync('python3', ['-c', script], { encoding: 'utf8' });
    if (py.error || py.status !== 0) {
      console.log('no usable python3 here: the second plist parser was not run');
      return;
    }
    const files = [...labels.map((l) => join(agents, `${l}.plist`)), fallbackPlist];
    const run = spawnSync('python3', ['-c', script, ...files], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});

describe('vigil install for systemd', () => {
  const prefix = freshDir('systemd');
  const r = install(['--no-load', ...base('systemd', prefix)]);
  const loc = r.plan.locations;
  const units = join(prefix, '.config', 'systemd', 'user');
  const names = [
    'vigil-signal-daemon.service',
    'vigil-tcp-relay.service',
    'vigil-inference-server.service',
    'vigil-inference-fallback.service',
    'vigil-guardian.service',
    'vigil-status-page.service',
    'vigil-health-check.service',
    'vigil-health-check.timer',
  ];
  /** `Key=value` settings of a unit, by section; repeated keys keep every value. */
  const unit = (name: string) => {
    const sections: Record<string, Record<string, string[]>> = {};
    let section = '';
    for (const line of readFileSync(join(units, name), 'utf8').split('\n')) {
      if (line.startsWith('#') || line.trim() === '') continue;
      const s = /^\[(\w+)\]$/.exec(line);
      if (s) {
        section = s[1]!;
        sections[section] = {};
        continue;
      }
      const kv = /^(\w+)=(.*)$/.exec(line);
      if (!kv) throw new Error(`${name}: not a setting: ${line}`);
      const settings = sections[section]!;
      settings[kv[1]!] = [...(settings[kv[1]!] ?? []), kv[2]!];
    }
    return sections;
  };
  const one = (name: string, section: string, key: string) => {
    const v = unit(name)[section]?.[key];
    expect([name, key, v?.length]).toEqual([name, key, 1]);
    return v![0]!;
  };
  const execStart = (name: string) => one(name, 'Service', 'ExecStart').split(' ');

  it('writes a unit per service, a timer, and the two configurations', () => {
    expect(r.code).toBe(0);
    expect(r.calls).toEqual([]);
    expect(readdirSync(units).sort()).toEqual([...names].sort());
    expect(loc.logs).toBe(join(prefix, '.local', 'state', 'vigil', 'log'));
  });

  it('every unit runs node on the package binary that exists in the checkout, logging to files', () => {
    for (const name of names.filter((x) => x.endsWith('.service'))) {
      const argv = execStart(name);
      expect(argv[0]).toBe(process.execPath);
      const pkg = name.replace(/^vigil-|\.service$/g, '').replace('inference-fallback', 'inference-server');
      expect(argv[1]).toBe(binaryOf(pkg));
      expect(existsSync(argv[1]!)).toBe(true);
      const out = one(name, 'Service', 'StandardOutput');
      expect(out).toMatch(new RegExp(`^append:${loc.logs}/`));
      expect(one(name, 'Service', 'StandardError')).toBe(out);
      expect(readFileSync(join(units, name), 'utf8')).not.toMatch(/@[A-Z_]+@/);
    }
  });

  it('runs the status page with --restart-with systemd, and its unit names are the installed ones', () => {
    const argv = execStart('vigil-status-page.service');
    expect(argv.slice(argv.indexOf('--restart-with'))).toEqual(['--restart-with', 'systemd']);
    expect(INSTALLED_SERVICES.map(unitOf).sort()).toEqual(names.filter((x) => x.endsWith('.service')).sort());
  });

  it('makes the guardian exit 2 final, the health check a oneshot whose 1 and 2 are results, every 5 minutes', () => {
    expect(execStart('vigil-guardian.service').slice(2)).toEqual([
      'run',
      '--config',
      join(loc.config, 'guardian.json'),
    ]);
    expect(one('vigil-guardian.service', 'Service', 'Restart')).toBe('on-failure');
    expect(one('vigil-guardian.service', 'Service', 'RestartPreventExitStatus').split(' ')).toContain('2');
    expect(one('vigil-health-check.service', 'Service', 'Type')).toBe('oneshot');
    expect(one('vigil-health-check.service', 'Service', 'SuccessExitStatus')).toBe('1 2');
    expect(execStart('vigil-health-check.service').slice(2)).toEqual([
      '--fix',
      '--quiet',
      '--config',
      join(loc.config, 'health.json'),
    ]);
    expect(one('vigil-health-check.timer', 'Timer', 'OnUnitActiveSec')).toBe('5min');
    expect(one('vigil-health-check.timer', 'Timer', 'Unit')).toBe('vigil-health-check.service');
    expect(one('vigil-health-check.timer', 'Install', 'WantedBy')).toBe('timers.target');
  });

  it('runs the primary while the fallback lock is absent and the fallback only while it exists', () => {
    const lock = join(loc.state, 'inference-fallback.lock');
    expect(one('vigil-inference-server.service', 'Unit', 'ConditionPathExists')).toBe(`!${lock}`);
    expect(one('vigil-inference-fallback.service', 'Unit', 'ConditionPathExists')).toBe(lock);
    expect(one('vigil-inference-fallback.service', 'Unit', 'Conflicts')).toBe('vigil-inference-server.service');
    const primary = execStart('vigil-inference-server.service');
    const fallback = execStart('vigil-inference-fallback.service');
    expect(after(fallback, '--http')).toBe(after(primary, '--http'));
    expect([after(primary, '--gpu'), after(fallback, '--gpu')]).toEqual(['auto', 'off']);
  });

  it('writes configurations that parseConfig and resolveConfig accept, naming these units and logs', () => {
    const g = parseConfig(JSON.parse(readFileSync(join(loc.config, 'guardian.json'), 'utf8')), loc.config);
    expect(g.primary.service).toEqual({ kind: 'systemd', unit: 'vigil-inference-server.service', user: true });
    expect(g.fallback?.service).toEqual({ kind: 'systemd', unit: 'vigil-inference-fallback.service', user: true });
    expect(`append:${g.primary.log}`).toBe(one('vigil-inference-server.service', 'Service', 'StandardOutput'));
    expect(g.primary.accessLog).toBe(after(execStart('vigil-inference-server.service'), '--access-log'));
    expect(g.fallback?.accessLog).toBe(after(execStart('vigil-inference-fallback.service'), '--access-log'));
    expect(g.lockFile).toBe(join(loc.state, 'inference-fallback.lock'));
    const h = resolveConfig(JSON.parse(readFileSync(join(loc.config, 'health.json'), 'utf8')));
    expect(h.daemon.service).toEqual({ kind: 'systemd', unit: 'vigil-signal-daemon.service', user: true });
    expect(h.relay?.service).toEqual({ kind: 'systemd', unit: 'vigil-tcp-relay.service', user: true });
    expect(h.daemon.relaunch).toEqual(execStart('vigil-signal-daemon.service'));
    expect(`append:${h.daemon.log}`).toBe(one('vigil-signal-daemon.service', 'Service', 'StandardOutput'));
  });

  it('stops every service within a bound: SIGTERM, then SIGKILL to all it started; never restarts after exit 2 or 78', () => {
    for (const name of names.filter((x) => x.endsWith('.service'))) {
      expect([name, Number(one(name, 'Service', 'TimeoutStopSec'))]).toEqual([name, expect.any(Number)]);
      expect(Number(one(name, 'Service', 'TimeoutStopSec'))).toBeGreaterThan(10); // the server's grace + 2 s
      expect([name, one(name, 'Service', 'KillMode')]).toEqual([name, 'mixed']);
      if (unit(name).Service!.Restart) {
        expect([name, one(name, 'Service', 'RestartPreventExitStatus').split(' ').sort()]).toEqual([name, ['2', '78']]);
      }
    }
  });

  it('passes systemd-analyze verify', () => {
    const which = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
    if (which.error || which.status !== 0) {
      console.log('systemd-analyze is not installed here: the units were not verified by systemd');
      return;
    }
    // A user manager is not running in CI; verify needs only a private runtime directory.
    const runtime = freshDir('runtime');
    chmodSync(runtime, 0o700);
    const v = spawnSync('systemd-analyze', ['verify', '--user', ...names.map((x) => join(units, x))], {
      encoding: 'utf8',
      cwd: units,
      env: { ...process.env, XDG_RUNTIME_DIR: runtime },
    });
    expect(`${v.stdout}${v.stderr}`).toBe('');
    expect(v.status).toBe(0);
  });

  it('quotes extra arguments for ExecStart and refuses paths a unit cannot carry', () => {
    const q = install([
      '--no-load',
      ...base('systemd'),
      '--daemon-arg=--profile-name',
      '--daemon-arg=My "Name" 100% $HOME',
    ]);
    expect(q.code).toBe(0);
    const text = readFileSync(join(q.plan.locations.units, 'vigil-signal-daemon.service'), 'utf8');
    expect(text).toContain(' --profile-name "My \\"Name\\" 100%% $$HOME"\n');
    const h = resolveConfig(JSON.parse(readFileSync(join(q.plan.locations.config, 'health.json'), 'utf8')));
    expect(h.daemon.relaunch?.slice(-2)).toEqual(['--profile-name', 'My "Name" 100% $HOME']);
    const bad = install(['--dry-run', ...base('systemd', join(freshDir('spaces'), 'a home'))]);
    expect(bad.code).toBe(78);
    expect(bad.stderr).toMatch(/systemd unit files cannot carry whitespace/);
  });
});

describe('vigil install file modes', () => {
  it('under umask 022: its directories are 0700 (an existing 0755 one too), configurations, keys and the model directory private', () => {
    const prefix = freshDir('modes');
    const state = join(prefix, '.local', 'state', 'vigil');
    mkdirSync(state, { recursive: true, mode: 0o755 });
    chmodSync(state, 0o755);
    // deploy/install, as an operator runs it from a login shell: the default model (make-model)
    // and the mutual-TLS certificates are made too.
    const run = spawnSync(
      '/bin/sh',
      [
        '-c',
        'umask 022 && exec "$0" "$@"',
        process.execPath,
        INSTALL,
        '--no-load',
        '--json',
        '--platform',
        'systemd',
        '--node',
        process.execPath,
        '--prefix',
        prefix,
      ],
      { encoding: 'utf8', env: { ...process.env, PATH: `${fakeBin}:${process.env.PATH}` } },
    );
    expect(`${run.stderr}`).toBe('');
    expect(run.status).toBe(0);
    const units = join(prefix, '.config', 'systemd', 'user');
    // Exceptions, each with its reason: units are read by systemd (0644 as it expects); the model
    // and the certificates hold no secret (their directories are 0700 all the same).
    const readable = (p: string) =>
      dirname(p) === units || p.endsWith('.gguf') || /\/pki\/(ca|server|client)\.pem$/.test(p);
    const wrong: string[] = [];
    const seen: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const full = join(dir, e.name);
        const mode = statSync(full).mode & 0o777;
        seen.push(full.slice(prefix.length + 1));
        if (e.isDirectory()) {
          if (mode !== 0o700) wrong.push(`${full} ${mode.toString(8)}`);
          walk(full);
        } else if (mode !== (readable(full) ? 0o644 : 0o600)) wrong.push(`${full} ${mode.toString(8)}`);
      }
    };
    // vigil's own directories and the units' (the home's .local and .local/state were made above).
    const roots = ['.config/vigil', '.local/state/vigil', '.local/share/vigil', '.config/systemd/user'];
    for (const root of roots.map((d) => join(prefix, d))) {
      const mode = statSync(root).mode & 0o777;
      if (mode !== 0o700) wrong.push(`${root} ${mode.toString(8)}`);
      walk(root);
    }
    expect(wrong).toEqual([]);
    expect(seen).toEqual(
      expect.arrayContaining([
        '.config/vigil/guardian.json',
        '.local/share/vigil/models/tiny.gguf',
        '.local/share/vigil/pki/server-key.pem',
        '.local/state/vigil/log',
        '.config/systemd/user/vigil-guardian.service',
      ]),
    );
  }, 120_000);
});

describe('vigil install loading, idempotence and uninstall', () => {
  it('--dry-run on an empty home lists exactly the launchd commands and writes nothing', () => {
    const prefix = freshDir('dry');
    const r = install(['--dry-run', '--node', process.execPath, '--platform', 'launchd', '--prefix', prefix]);
    expect(r.code).toBe(0);
    expect(r.calls).toEqual([]);
    expect(readdirSync(prefix)).toEqual([]);
    const { data, pki } = r.plan.locations;
    const bin = join(root, 'packages/inference-server/bin/inference-server.js');
    const plist = (l: string) => join(prefix, 'Library', 'LaunchAgents', `org.vigil.${l}.plist`);
    expect(argvs(r.plan.commands)).toEqual([
      [process.execPath, bin, 'make-model', '--out', join(data, 'models', 'tiny.gguf')],
      [process.execPath, bin, 'certs', '--out', pki],
      ...['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page', 'health-check'].flatMap((l) => [
        ['launchctl', 'bootout', `gui/${uid}/org.vigil.${l}`],
        ['launchctl', 'bootstrap', `gui/${uid}`, plist(l)],
      ]),
    ]);
    expect(r.plan.commands.filter((c) => c.mayFail).map((c) => c.argv[1])).toEqual(Array(6).fill('bootout'));
    expect(r.plan.files.every((f) => f.action === 'create')).toBe(true);
  });

  it('--dry-run on an empty home lists exactly the systemd commands', () => {
    const prefix = freshDir('dry');
    const r = install([
      '--dry-run',
      '--node',
      process.execPath,
      '--platform',
      'systemd',
      '--prefix',
      prefix,
      '--model',
      model,
      '--linger',
    ]);
    expect(r.code).toBe(0);
    expect(readdirSync(prefix)).toEqual([]);
    expect(argvs(r.plan.commands)).toEqual([
      [
        process.execPath,
        join(root, 'packages/inference-server/bin/inference-server.js'),
        'certs',
        '--out',
        r.plan.locations.pki,
      ],
      ['systemctl', '--user', 'daemon-reload'],
      [
        'systemctl',
        '--user',
        'enable',
        '--now',
        'vigil-signal-daemon.service',
        'vigil-tcp-relay.service',
        'vigil-inference-server.service',
        'vigil-inference-fallback.service',
        'vigil-guardian.service',
        'vigil-status-page.service',
        'vigil-health-check.timer',
      ],
      ['loginctl', 'enable-linger', expect.any(String)],
    ]);
  });

  it('launchd: loads every agent once, changes nothing when run again, reloads only what changed', () => {
    const prefix = freshDir('launchd');
    const fake = freshDir('fake');
    const plist = (l: string) => join(prefix, 'Library', 'LaunchAgents', `org.vigil.${l}.plist`);
    const boot = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page', 'health-check'];

    const first = install(base('launchd', prefix), fake);
    expect([first.code, first.stderr]).toEqual([0, '']);
    expect(first.calls).toEqual(
      boot.flatMap((l) => [
        ['launchctl', 'bootout', `gui/${uid}/org.vigil.${l}`],
        ['launchctl', 'bootstrap', `gui/${uid}`, plist(l)],
      ]),
    );
    const mtimes = first.plan.files.map((f) => statSync(f.path).mtimeMs);

    const again = install(base('launchd', prefix), fake);
    expect(again.code).toBe(0);
    expect(again.plan.files.every((f) => f.action === 'unchanged')).toBe(true);
    expect(again.plan.files.map((f) => statSync(f.path).mtimeMs)).toEqual(mtimes);
    expect(again.calls).toEqual(boot.map((l) => ['launchctl', 'print', `gui/${uid}/org.vigil.${l}`]));

    // An agent someone booted out is loaded again; the others are left alone.
    spawnSync(join(fakeBin, 'launchctl'), ['bootout', `gui/${uid}/org.vigil.guardian`], {
      env: { ...process.env, FAKE_STATE: fake },
    });
    const reload = install(base('launchd', prefix), fake);
    expect(reload.calls.filter((c) => c[1] !== 'print')).toEqual([
      ['launchctl', 'bootstrap', `gui/${uid}`, plist('guardian')],
    ]);

    // Another account: the daemon's plist and the health check's configuration change.
    const changed = install([...base('launchd', prefix), '--account', '+15550000009'], fake);
    expect(changed.plan.files.filter((f) => f.action !== 'unchanged').map((f) => basename(f.path))).toEqual([
      'org.vigil.signal-daemon.plist',
      'health.json',
    ]);
    expect(changed.calls.filter((c) => c[1] !== 'print')).toEqual([
      ['launchctl', 'bootout', `gui/${uid}/org.vigil.signal-daemon`],
      ['launchctl', 'bootstrap', `gui/${uid}`, plist('signal-daemon')],
    ]);
  }, 60000);

  it('launchd: with the fallback lock present, install keeps the primary unloaded and loads the fallback', () => {
    const prefix = freshDir('launchd');
    const fake = freshDir('fake');
    const first = install(base('launchd', prefix), fake);
    expect(first.code).toBe(0);
    writeFileSync(join(first.plan.locations.state, 'inference-fallback.lock'), '{}');
    const r = install(base('launchd', prefix), fake);
    expect(r.code).toBe(0);
    expect(r.calls.filter((c) => c[1] !== 'print')).toEqual([
      ['launchctl', 'bootout', `gui/${uid}/org.vigil.inference-server`],
      [
        'launchctl',
        'bootstrap',
        `gui/${uid}`,
        join(first.plan.locations.config, 'launchd', 'org.vigil.inference-fallback.plist'),
      ],
    ]);
    expect(r.plan.notes.join('\n')).toMatch(/fallback lock .* exists/);
  }, 60000);

  it('systemd: reloads and enables once, then only re-enables (a no-op), and try-restarts what changed', () => {
    const prefix = freshDir('systemd');
    const fake = freshDir('fake');
    const enable = [
      'systemctl',
      '--user',
      'enable',
      '--now',
      'vigil-signal-daemon.service',
      'vigil-tcp-relay.service',
      'vigil-inference-server.service',
      'vigil-inference-fallback.service',
      'vigil-guardian.service',
      'vigil-status-page.service',
      'vigil-health-check.timer',
    ];
    const first = install(base('systemd', prefix), fake);
    expect(first.code).toBe(0);
    expect(first.calls).toEqual([['systemctl', '--user', 'daemon-reload'], enable]);
    const again = install(base('systemd', prefix), fake);
    expect(again.plan.files.every((f) => f.action === 'unchanged')).toBe(true);
    expect(again.calls).toEqual([enable]);
    const changed = install([...base('systemd', prefix), '--account', '+15550000009'], fake);
    expect(changed.calls).toEqual([
      ['systemctl', '--user', 'daemon-reload'],
      ['systemctl', '--user', 'try-restart', 'vigil-signal-daemon.service'],
      enable,
    ]);
  }, 60000);

  it('a failing service-manager command is reported, and install exits 1', () => {
    const stubborn = freshDir('bin');
    writeFileSync(
      join(stubborn, 'launchctl'),
      '#!/bin/sh\nif [ "$1" = bootstrap ]; then echo "Bootstrap failed: 5: Input/output error" >&2; exit 5; fi\nexit 0\n',
    );
    chmodSync(join(stubborn, 'launchctl'), 0o755);
    const r = spawnSync(process.execPath, [...vigil(base('launchd')), '--relay-listen', 'off'], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${stubborn}:${process.env.PATH}` },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/launchctl bootstrap gui\/\d+ \S+org\.vigil\.signal-daemon\.plist failed \(rc 5\)/);
    expect(r.stdout).toMatch(/5 command\(s\) failed/);
  }, 60000);

  it('runs the services with the node found on PATH (not its resolved version directory) unless --node is given', () => {
    const dir = freshDir('nodebin');
    writeFileSync(join(dir, 'node'), '#!/bin/sh\nexit 0\n');
    chmodSync(join(dir, 'node'), 0o755);
    const args = ['--no-load', '--json', '--platform', 'systemd', '--model', model, '--no-mtls'];
    const r = spawnSync(process.execPath, [...vigil(args), '--prefix', freshDir('systemd')], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${dir}:${process.env.PATH}` },
    });
    expect(r.status).toBe(0);
    const units = (JSON.parse(r.stdout) as Result['plan']).locations.units;
    expect(readFileSync(join(units, 'vigil-guardian.service'), 'utf8')).toContain(`\nExecStart=${join(dir, 'node')} `);
  });

  it('--relay-listen off installs no relay and checks none; --guardian-merge adds an alert', () => {
    const merge = join(freshDir('merge'), 'alert.json');
    writeFileSync(merge, JSON.stringify({ alert: { rpc: '127.0.0.1:8080', recipient: ['+15550000002'] } }));
    const r = install(['--no-load', ...base('systemd'), '--relay-listen', 'off', '--guardian-merge', merge]);
    expect(r.code).toBe(0);
    expect(r.plan.files.map((f) => basename(f.path))).not.toContain('vigil-tcp-relay.service');
    const h = resolveConfig(JSON.parse(readFileSync(join(r.plan.locations.config, 'health.json'), 'utf8')));
    expect(h.relay).toBeUndefined();
    const g = parseConfig(JSON.parse(readFileSync(join(r.plan.locations.config, 'guardian.json'), 'utf8')), '/');
    expect(g.alert?.recipient).toEqual(['+15550000002']);
  });

  it('uninstall --dry-run lists the removal; uninstall removes units and configurations, keeps data', () => {
    for (const platform of ['launchd', 'systemd'] as const) {
      const prefix = freshDir(platform);
      const fake = freshDir('fake');
      const installed = install(base(platform, prefix), fake);
      expect(installed.code).toBe(0);
      const written = installed.plan.files.map((f) => f.path);
      const dry = install(['uninstall', '--dry-run', ...base(platform, prefix)], fake);
      expect(dry.code).toBe(0);
      expect(dry.calls).toEqual([]);
      expect(dry.plan.files.map((f) => [f.path, f.action]).sort()).toEqual(written.map((p) => [p, 'remove']).sort());
      const services = [
        'health-check',
        'status-page',
        'guardian',
        'inference-fallback',
        'inference-server',
        'tcp-relay',
        'signal-daemon',
      ];
      if (platform === 'launchd') {
        expect(argvs(dry.plan.commands)).toEqual(
          services.map((s) => ['launchctl', 'bootout', `gui/${uid}/org.vigil.${s}`]),
        );
      } else {
        const units = services.flatMap((s) => [
          ...(s === 'health-check' ? ['vigil-health-check.timer'] : []),
          `vigil-${s}.service`,
        ]);
        expect(argvs(dry.plan.commands)).toEqual([
          ['systemctl', '--user', 'disable', '--now', ...units],
          ['systemctl', '--user', 'daemon-reload'],
          ['systemctl', '--user', 'reset-failed', ...services.map((s) => `vigil-${s}.service`)],
        ]);
      }
      expect(written.every((p) => existsSync(p))).toBe(true);
      const gone = install(['uninstall', ...base(platform, prefix)], fake);
      expect(gone.code).toBe(0);
      expect(written.filter((p) => existsSync(p))).toEqual([]);
      expect(existsSync(installed.plan.locations.state)).toBe(true);
      expect(existsSync(installed.plan.locations.data)).toBe(true);
      const twice = install(['uninstall', ...base(platform, prefix)], fake);
      expect([twice.code, twice.plan.files]).toEqual([0, []]);
    }
  }, 60000);

  it('refuses bad usage with exit 78 and one clear line', () => {
    const cases: [string[], RegExp][] = [
      [['--platform', 'upstart'], /--platform must be launchd or systemd/],
      [['--account', '12345'], /E\.164/],
      [['--model', '/nonexistent/model.gguf'], /--model .* does not exist/],
      [['--relay-listen', 'nowhere'], /--relay-listen/],
      [['--bogus'], /unknown option '--bogus'/],
      [['reinstall'], /too many arguments for 'install'/],
      [['--root', scratch], /--root must be a vigil checkout/],
    ];
    for (const [args, message] of cases) {
      const r = spawnSync(process.execPath, [INSTALL, '--dry-run', '--prefix', freshDir('bad'), ...args], {
        encoding: 'utf8',
      });
      expect([args, r.status]).toEqual([args, 78]);
      expect(r.stderr).toMatch(message);
    }
    const unknown = spawnSync(process.execPath, [INSTALL, 'reinstall', '--dry-run'], { encoding: 'utf8' });
    expect(unknown.status).toBe(78);
    expect(unknown.stderr).toMatch(/unknown command 'reinstall'/);
    const help = spawnSync(process.execPath, [INSTALL, '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: vigil install/);
    const uninstallHelp = spawnSync(process.execPath, [INSTALL, 'uninstall', '--help'], { encoding: 'utf8' });
    expect(uninstallHelp.status).toBe(0);
    expect(uninstallHelp.stdout).toMatch(/^Usage: vigil uninstall/);
  });

  it('deploy/install is vigil install: the same plan, and uninstall the same removal', () => {
    const prefix = freshDir('launcher');
    const args = ['--dry-run', '--json', ...base('systemd', prefix)];
    for (const command of [[], ['install'], ['uninstall']]) {
      const launched = spawnSync(process.execPath, [INSTALL, ...command, ...args], { encoding: 'utf8' });
      const direct = spawnSync(process.execPath, vigil([...(command[0] === 'uninstall' ? command : []), ...args]), {
        encoding: 'utf8',
      });
      expect([command, launched.status, launched.stderr]).toEqual([command, 0, '']);
      expect(JSON.parse(launched.stdout)).toEqual(JSON.parse(direct.stdout));
      expect(JSON.parse(launched.stdout).command).toBe(command[0] ?? 'install');
    }
  });

  it('is documented: every flag of --help is in deploy/README.md', () => {
    const help = spawnSync(process.execPath, vigil(['--help']), { encoding: 'utf8' }).stdout;
    const readme = readFileSync(join(root, 'deploy', 'README.md'), 'utf8');
    // The option column of each option line: "  --config-dir, --state-dir <dir>   meaning".
    const flags = help
      .split('\n')
      .filter((line) => /^ {2}-/.test(line))
      .flatMap(
        (line) =>
          line
            .trim()
            .split(/\s{2,}/)[0]!
            .match(/--[a-z][a-z-]*/g) ?? [],
      );
    expect(flags.length).toBeGreaterThan(15);
    for (const flag of new Set(flags)) expect([flag, readme.includes(`\`${flag}`)]).toEqual([flag, true]);
  });
});

// deploy/install: renders vigil's launchd agents or systemd user units with this user's paths,
// writes the guardian's and the health check's configurations, and loads the services.
// Idempotent: a file whose rendering has not changed is not rewritten and its service is not
// reloaded. `deploy/install uninstall` unloads and removes what install wrote (never data, state
// or logs). Every command is run by argv, without a shell. See deploy/README.md.
import { spawnSync } from 'node:child_process';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const EXIT = { OK: 0, FAILURE: 1, CONFIG: 78 };
const DEFAULT_ACCOUNT = '+15550000001';
const DEFAULT_RELAY = '10.0.0.1:7583';
const LOCK_NAME = 'inference-fallback.lock';

/** The services, in start order; uninstall goes the other way. */
const SERVICES = [
  { id: 'signal-daemon', label: 'org.vigil.signal-daemon', unit: 'vigil-signal-daemon.service' },
  { id: 'tcp-relay', label: 'org.vigil.tcp-relay', unit: 'vigil-tcp-relay.service', relay: true },
  {
    id: 'inference-server',
    label: 'org.vigil.inference-server',
    unit: 'vigil-inference-server.service',
    primary: true,
  },
  {
    id: 'inference-fallback',
    label: 'org.vigil.inference-fallback',
    unit: 'vigil-inference-fallback.service',
    fallback: true,
  },
  { id: 'guardian', label: 'org.vigil.guardian', unit: 'vigil-guardian.service' },
  {
    id: 'health-check',
    label: 'org.vigil.health-check',
    unit: 'vigil-health-check.service',
    timer: 'vigil-health-check.timer',
  },
];
const BINARIES = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check'];

class UsageError extends Error {}

const USAGE = `usage: deploy/install [install|uninstall] [options]

  --platform <launchd|systemd>  service manager (default: launchd on macOS, systemd elsewhere)
  --prefix <dir>                use <dir> in place of the home directory for every default path
  --dry-run                     print the files it would write and the commands it would run; change nothing
  --no-load                     write the files but run no service-manager command
  --json                        print the plan (or what was done) as one JSON object
  --node <path>                 the node binary the services run (default: the first node on PATH)
  --root <dir>                  the vigil checkout (default: the directory above deploy/)
  --account <number>            the messaging account, E.164 (default: ${DEFAULT_ACCOUNT}, local network)
  --daemon-arg=<arg>            one more argument for signal-daemon (repeat), e.g. --daemon-arg=--backend --daemon-arg=signal-cli
  --model <file>                the GGUF model (default: DATA/models/tiny.gguf, written by make-model when missing)
  --model-id <id>               the id the model is served under (default: the file name without .gguf)
  --inference-arg=<arg>         one more argument for both inference servers (repeat)
  --no-mtls                     no certificates and no mutual-TLS listener on 127.0.0.1:1338
  --relay-listen <addr|off>     the relay's link address (default: ${DEFAULT_RELAY}); off: no relay, no relay check
  --guardian-merge <file>       a JSON object merged into the guardian configuration (e.g. "alert")
  --health-merge <file>         a JSON object merged into the health-check configuration (e.g. "gateway", "flowConfig")
  --config-dir, --state-dir, --data-dir, --log-dir, --unit-dir <dir>   override one location
  --linger                      systemd: also run loginctl enable-linger, so the units run without a login
  -h, --help                    print this and exit 0

exit codes: 0 done, 1 a command failed, 78 bad usage or configuration`;

// ---- options --------------------------------------------------------------------------------

function parseOptions(argv) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        platform: { type: 'string' },
        prefix: { type: 'string' },
        'dry-run': { type: 'boolean' },
        'no-load': { type: 'boolean' },
        json: { type: 'boolean' },
        node: { type: 'string' },
        root: { type: 'string' },
        account: { type: 'string' },
        'daemon-arg': { type: 'string', multiple: true },
        model: { type: 'string' },
        'model-id': { type: 'string' },
        'inference-arg': { type: 'string', multiple: true },
        'no-mtls': { type: 'boolean' },
        'relay-listen': { type: 'string' },
        'guardian-merge': { type: 'string' },
        'health-merge': { type: 'string' },
        'config-dir': { type: 'string' },
        'state-dir': { type: 'string' },
        'data-dir': { type: 'string' },
        'log-dir': { type: 'string' },
        'unit-dir': { type: 'string' },
        linger: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError(err.message);
  }
  const { values: v, positionals } = parsed;
  if (positionals.length > 1) throw new UsageError(`one command at most, got: ${positionals.join(' ')}`);
  const command = positionals[0] ?? 'install';
  if (command !== 'install' && command !== 'uninstall') {
    throw new UsageError(`unknown command "${command}": expected install or uninstall`);
  }
  const platform = v.platform ?? (process.platform === 'darwin' ? 'launchd' : 'systemd');
  if (platform !== 'launchd' && platform !== 'systemd') {
    throw new UsageError(`--platform must be launchd or systemd, got "${platform}"`);
  }
  const abs = (flag, p) => {
    if (p === undefined) return undefined;
    if (p === '') throw new UsageError(`--${flag} must not be empty`);
    return resolve(p);
  };
  const account = v.account ?? DEFAULT_ACCOUNT;
  if (!/^\+[1-9]\d{5,14}$/.test(account)) throw new UsageError(`--account must be an E.164 number, got "${account}"`);
  const relayListen = v['relay-listen'] ?? DEFAULT_RELAY;
  if (relayListen !== 'off' && !/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/.test(relayListen)) {
    throw new UsageError(`--relay-listen must be HOST:PORT or off, got "${relayListen}"`);
  }
  const modelId = v['model-id'];
  if (modelId !== undefined && !/^[A-Za-z0-9._:-]+$/.test(modelId)) {
    throw new UsageError(`--model-id may hold letters, digits and . _ : - only, got "${modelId}"`);
  }
  if (v.linger && platform !== 'systemd') throw new UsageError('--linger is for --platform systemd');
  return {
    command,
    platform,
    help: v.help === true,
    dryRun: v['dry-run'] === true,
    load: v['no-load'] !== true,
    json: v.json === true,
    node: abs('node', v.node) ?? nodeOnPath(),
    root: abs('root', v.root) ?? resolve(HERE, '..'),
    prefix: abs('prefix', v.prefix),
    account,
    daemonArgs: v['daemon-arg'] ?? [],
    model: abs('model', v.model),
    modelId,
    inferenceArgs: v['inference-arg'] ?? [],
    mtls: v['no-mtls'] !== true,
    relayListen,
    guardianMerge: abs('guardian-merge', v['guardian-merge']),
    healthMerge: abs('health-merge', v['health-merge']),
    dirs: {
      config: abs('config-dir', v['config-dir']),
      state: abs('state-dir', v['state-dir']),
      data: abs('data-dir', v['data-dir']),
      logs: abs('log-dir', v['log-dir']),
      units: abs('unit-dir', v['unit-dir']),
    },
    linger: v.linger === true,
  };
}

/**
 * The node the services run: the first `node` on PATH as it is named there (a package manager's
 * stable link such as /opt/homebrew/bin/node survives upgrades; the versioned directory it
 * points into does not), else the node running this script.
 */
function nodeOnPath() {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, 'node');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return process.execPath;
}

/** Every location, from the flags, the XDG variables (unless --prefix) and the home directory. */
function locations(o) {
  const home = o.prefix ?? homedir();
  const xdg = (name, fallback) => {
    const value = o.prefix ? undefined : process.env[name];
    return value && isAbsolute(value) ? value : join(home, fallback);
  };
  const configHome = xdg('XDG_CONFIG_HOME', '.config');
  const state = o.dirs.state ?? join(xdg('XDG_STATE_HOME', '.local/state'), 'vigil');
  const data = o.dirs.data ?? join(xdg('XDG_DATA_HOME', '.local/share'), 'vigil');
  const config = o.dirs.config ?? join(configHome, 'vigil');
  const logs = o.dirs.logs ?? (o.platform === 'launchd' ? join(home, 'Library', 'Logs', 'vigil') : join(state, 'log'));
  const units =
    o.dirs.units ??
    (o.platform === 'launchd' ? join(home, 'Library', 'LaunchAgents') : join(configHome, 'systemd', 'user'));
  return { home, config, state, data, logs, units, pki: join(data, 'pki') };
}

// ---- rendering ------------------------------------------------------------------------------

const PLACEHOLDER = /@([A-Z_]+)@/g;

function substitute(text, values, escapeValue, where) {
  return text.replace(PLACEHOLDER, (_, name) => {
    const value = values[name];
    if (typeof value !== 'string') throw new Error(`${where}: unknown placeholder @${name}@`);
    return escapeValue(value, name);
  });
}

const xmlEscape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A launchd plist: `<string>@LIST@</string>` lines expand to one element per item. */
function renderPlist(template, values, lists, where) {
  const lines = [];
  for (const line of template.split('\n')) {
    const m = /^(\s*)<string>@([A-Z_]+)@<\/string>$/.exec(line);
    if (m && lists[m[2]] !== undefined) {
      for (const item of lists[m[2]]) lines.push(`${m[1]}<string>${xmlEscape(item)}</string>`);
    } else {
      lines.push(substitute(line, values, xmlEscape, where));
    }
  }
  return lines.join('\n');
}

/** A value placed inside a systemd setting: paths and names, never split or expanded. */
function systemdScalar(value, name) {
  if (/[\s"'\\$;]/.test(value) || /\p{Cc}/u.test(value)) {
    throw new UsageError(
      `@${name}@ = ${JSON.stringify(value)}: systemd unit files cannot carry whitespace, quotes, backslashes, ` +
        '$ or ; in this position; choose a path without them',
    );
  }
  return value.replace(/%/g, '%%');
}

/** One argument of an ExecStart line, quoted when it needs to be. */
function systemdArg(arg) {
  if (/\p{Cc}/u.test(arg)) throw new UsageError(`argument ${JSON.stringify(arg)} holds a control character`);
  const escaped = arg.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return escaped;
  return `"${escaped.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** A systemd unit: a ` @LIST@` word expands to the quoted items. */
function renderUnit(template, values, lists, where) {
  let text = template;
  for (const [name, items] of Object.entries(lists)) {
    const words = items.map((a) => ` ${systemdArg(a)}`).join('');
    text = text.replaceAll(` @${name}@`, () => words);
  }
  return substitute(text, values, systemdScalar, where);
}

/** A JSON configuration: an array element "@LIST@" expands to the items; strings substituted. */
function renderJson(template, values, lists, where) {
  const walk = (node) => {
    if (typeof node === 'string') return substitute(node, values, (s) => s, where);
    if (Array.isArray(node)) {
      return node.flatMap((item) => {
        const m = typeof item === 'string' ? /^@([A-Z_]+)@$/.exec(item) : null;
        if (m && lists[m[1]] !== undefined) return lists[m[1]];
        return [walk(item)];
      });
    }
    if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, x]) => [k, walk(x)]));
    return node;
  };
  return walk(JSON.parse(template));
}

const isPlainObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);

/** Deep merge of objects; arrays and scalars of `extra` replace. */
function merge(base, extra) {
  const out = { ...base };
  for (const [k, v] of Object.entries(extra)) out[k] = isPlainObject(v) && isPlainObject(out[k]) ? merge(out[k], v) : v;
  return out;
}

function readMerge(file, flag) {
  let value;
  try {
    value = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new UsageError(`--${flag} ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`);
  }
  if (!isPlainObject(value)) throw new UsageError(`--${flag} ${file}: expected a JSON object`);
  return value;
}

const template = (platform, name) => readFileSync(join(HERE, platform, name), 'utf8');

/** The files install writes, with their rendered contents. */
function renderAll(o, loc) {
  const bin = (name) => join(o.root, 'packages', name, 'bin', `${name}.js`);
  for (const name of BINARIES) {
    if (!existsSync(bin(name))) {
      throw new UsageError(`${bin(name)} does not exist: --root must be a vigil checkout (got ${o.root})`);
    }
  }
  const model = o.model ?? join(loc.data, 'models', 'tiny.gguf');
  const modelId = o.modelId ?? basename(model).replace(/\.gguf$/i, '');
  const values = {
    NODE: o.node,
    VIGIL_ROOT: o.root,
    ACCOUNT: o.account,
    MODEL: model,
    MODEL_ID: modelId,
    STATE: loc.state,
    LOGS: loc.logs,
    DATA: loc.data,
    CONFIG: loc.config,
    LAUNCH_AGENTS: loc.units,
    RELAY_LISTEN: o.relayListen,
  };
  const tls = o.mtls
    ? [
        '--tls-cert',
        join(loc.pki, 'server.pem'),
        '--tls-key',
        join(loc.pki, 'server-key.pem'),
        '--tls-ca',
        join(loc.pki, 'ca.pem'),
      ]
    : [];
  const lists = { DAEMON_ARGS: o.daemonArgs, INFERENCE_ARGS: [...tls, ...o.inferenceArgs] };
  const files = [];
  const services = SERVICES.filter((s) => !(s.relay && o.relayListen === 'off'));
  for (const s of services) {
    if (o.platform === 'launchd') {
      const name = `${s.label}.plist`;
      // The fallback lives outside LaunchAgents: launchd loads it only when the guardian does.
      const path = s.fallback ? join(loc.config, 'launchd', name) : join(loc.units, name);
      files.push({
        path,
        mode: 0o644,
        service: s,
        content: renderPlist(template('launchd', name), values, lists, name),
      });
    } else {
      for (const name of [s.unit, ...(s.timer ? [s.timer] : [])]) {
        files.push({
          path: join(loc.units, name),
          mode: 0o644,
          service: s,
          content: renderUnit(template('systemd', name), values, lists, name),
        });
      }
    }
  }
  let guardian = renderJson(template(o.platform, 'guardian.json'), values, lists, 'guardian.json');
  if (o.guardianMerge) guardian = merge(guardian, readMerge(o.guardianMerge, 'guardian-merge'));
  let health = renderJson(template(o.platform, 'health.json'), values, lists, 'health.json');
  if (o.relayListen === 'off') delete health.relay;
  if (o.healthMerge) health = merge(health, readMerge(o.healthMerge, 'health-merge'));
  files.push(
    { path: join(loc.config, 'guardian.json'), mode: 0o600, config: 'guardian', content: json(guardian) },
    { path: join(loc.config, 'health.json'), mode: 0o600, config: 'health', content: json(health) },
  );
  return { files, model, modelId, defaultModel: o.model === undefined, values };
}

const json = (value) => `${JSON.stringify(value, null, 2)}\n`;

/** Validates the rendered configurations with the packages' own validators, when built. */
async function validateConfigs(o, files) {
  const checked = [];
  const load = async (pkg) => {
    const file = join(o.root, 'packages', pkg, 'dist', 'config.js');
    if (!existsSync(file)) return null;
    try {
      return await import(pathToFileURL(file).href);
    } catch {
      return null;
    }
  };
  const guardian = await load('guardian');
  const health = await load('health-check');
  for (const f of files) {
    if (!f.config) continue;
    const value = JSON.parse(f.content);
    try {
      if (f.config === 'guardian' && typeof guardian?.parseConfig === 'function') {
        guardian.parseConfig(value, dirname(f.path));
        checked.push(f.path);
      }
      if (f.config === 'health' && typeof health?.resolveConfig === 'function') {
        health.resolveConfig(value);
        checked.push(f.path);
      }
    } catch (err) {
      throw new UsageError(`${f.path} would not be a valid configuration: ${err.message}`);
    }
  }
  return checked;
}

// ---- files and commands ---------------------------------------------------------------------

function readOrNull(path) {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
}

/** Temporary file, fsync, rename: a reader sees the old file or the new one, never half of one. */
function writeAtomic(path, content, mode) {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, mode);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

class Session {
  constructor(o) {
    this.o = o;
    this.commands = [];
    this.notes = [];
    this.failed = 0;
  }

  /** Runs (or, dry, records) a command. `may fail`: its failure is expected and ignored. */
  run(argv, { kind = 'run', mayFail = false, retries = 0, quiet = false } = {}) {
    const entry = { argv, kind, ...(mayFail ? { mayFail } : {}) };
    this.commands.push(entry);
    if (this.o.dryRun) return { rc: null };
    let r;
    for (let attempt = 0; ; attempt++) {
      r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
      const rc = r.error ? 127 : (r.status ?? 128);
      if (rc === 0 || attempt >= retries) {
        entry.rc = rc;
        break;
      }
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    }
    const output = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim() || (r.error ? r.error.message : '');
    if (entry.rc !== 0 && output) entry.output = output.split('\n').slice(-3).join(' | ');
    if (entry.rc !== 0 && kind === 'run' && !mayFail) {
      this.failed += 1;
      if (!quiet) process.stderr.write(`install: ${argv.join(' ')} failed (rc ${entry.rc}): ${entry.output ?? ''}\n`);
    }
    return { rc: entry.rc };
  }

  note(text) {
    this.notes.push(text);
  }
}

function launchdLoad(session, o, loc, files) {
  const uid = process.getuid?.() ?? 0;
  const domain = `gui/${uid}`;
  const lock = existsSync(join(loc.state, LOCK_NAME));
  const load = (f, s) => {
    const target = `${domain}/${s.label}`;
    if (f.action !== 'unchanged') {
      // bootout before bootstrap: launchd keeps the old definition of a loaded job otherwise.
      session.run(['launchctl', 'bootout', target], { mayFail: true });
      session.run(['launchctl', 'bootstrap', domain, f.path], { retries: 2 });
      return;
    }
    // Unchanged: load it only if it is not loaded (`print` exits non-zero for an unknown job).
    const r = session.run(['launchctl', 'print', target], { kind: 'check' });
    if (o.dryRun) {
      session.run(['launchctl', 'bootstrap', domain, f.path], { kind: 'if-not-loaded' });
    } else if (r.rc !== 0) {
      session.run(['launchctl', 'bootstrap', domain, f.path], { retries: 2 });
    }
  };
  for (const f of files) {
    const s = f.service;
    if (!s) continue;
    if (s.primary && lock) {
      session.note(
        `the fallback lock ${join(loc.state, LOCK_NAME)} exists: the primary stays unloaded (guardian restore brings it back)`,
      );
      session.run(['launchctl', 'bootout', `${domain}/${s.label}`], { mayFail: true });
      continue;
    }
    if (s.fallback) {
      if (lock) load(f, s);
      else if (f.action === 'update') session.run(['launchctl', 'bootout', `${domain}/${s.label}`], { mayFail: true });
      continue;
    }
    load(f, s);
  }
}

function systemdUnits(files, which) {
  return files.filter((f) => f.service && which(f)).map((f) => basename(f.path));
}

function systemdLoad(session, o, files) {
  const unitFiles = files.filter((f) => f.service);
  if (unitFiles.some((f) => f.action !== 'unchanged')) session.run(['systemctl', '--user', 'daemon-reload']);
  // Units that ran with an older definition pick up the new one (try-restart: only if running).
  const updated = systemdUnits(unitFiles, (f) => f.action === 'update');
  if (updated.length > 0) session.run(['systemctl', '--user', 'try-restart', ...updated]);
  const enable = systemdUnits(unitFiles, (f) => !f.path.endsWith('vigil-health-check.service'));
  session.run(['systemctl', '--user', 'enable', '--now', ...enable]);
  if (o.linger) session.run(['loginctl', 'enable-linger', userInfo().username]);
}

async function install(o) {
  const loc = locations(o);
  if (!existsSync(o.node)) throw new UsageError(`--node ${o.node} does not exist`);
  const rendered = renderAll(o, loc);
  if (!rendered.defaultModel && !existsSync(rendered.model)) {
    throw new UsageError(`--model ${rendered.model} does not exist`);
  }
  const validated = await validateConfigs(o, rendered.files);
  const files = rendered.files.map((f) => {
    const old = readOrNull(f.path);
    const action = old === null ? 'create' : old === f.content ? 'unchanged' : 'update';
    return { ...f, action };
  });
  const session = new Session(o);
  const dirs = [loc.config, loc.state, loc.data, loc.logs, loc.units];
  if (o.platform === 'launchd') dirs.push(join(loc.config, 'launchd'));
  if (!o.dryRun) {
    for (const d of dirs) mkdirSync(d, { recursive: true, mode: 0o700 });
    for (const f of files) if (f.action !== 'unchanged') writeAtomic(f.path, f.content, f.mode);
  }
  const inference = [o.node, join(o.root, 'packages', 'inference-server', 'bin', 'inference-server.js')];
  if (rendered.defaultModel && !existsSync(rendered.model)) {
    session.run([...inference, 'make-model', '--out', rendered.model]);
  }
  if (o.mtls && !existsSync(join(loc.pki, 'server.pem'))) {
    session.run([...inference, 'certs', '--out', loc.pki]);
  }
  if (o.load) {
    if (o.platform === 'launchd') launchdLoad(session, o, loc, files);
    else systemdLoad(session, o, files);
  } else {
    session.note('--no-load: no service-manager command was run');
  }
  return {
    command: 'install',
    platform: o.platform,
    dryRun: o.dryRun,
    locations: loc,
    model: rendered.model,
    modelId: rendered.modelId,
    directories: dirs,
    files: files.map((f) => ({ path: f.path, action: f.action, mode: `0${f.mode.toString(8)}` })),
    commands: session.commands,
    validated,
    notes: session.notes,
    failed: session.failed,
  };
}

async function uninstall(o) {
  const loc = locations(o);
  const session = new Session(o);
  const services = [...SERVICES].reverse();
  const paths = [];
  if (o.platform === 'launchd') {
    const uid = process.getuid?.() ?? 0;
    for (const s of services) {
      if (o.load) session.run(['launchctl', 'bootout', `gui/${uid}/${s.label}`], { mayFail: true });
      paths.push(s.fallback ? join(loc.config, 'launchd', `${s.label}.plist`) : join(loc.units, `${s.label}.plist`));
    }
  } else {
    const units = services.flatMap((s) => [...(s.timer ? [s.timer] : []), s.unit]);
    if (o.load) session.run(['systemctl', '--user', 'disable', '--now', ...units], { mayFail: true });
    paths.push(...units.map((u) => join(loc.units, u)));
  }
  paths.push(join(loc.config, 'guardian.json'), join(loc.config, 'health.json'));
  const removed = paths.filter((p) => existsSync(p));
  if (!o.dryRun) {
    for (const p of removed) rmSync(p, { force: true });
    if (o.platform === 'launchd') {
      try {
        rmSync(join(loc.config, 'launchd'), { recursive: false });
      } catch {
        // not empty, or already gone: left as it is
      }
    }
  }
  if (o.platform === 'systemd' && o.load) {
    session.run(['systemctl', '--user', 'daemon-reload']);
    session.run(['systemctl', '--user', 'reset-failed', ...services.map((s) => s.unit)], { mayFail: true });
  }
  session.note(
    `kept: data ${loc.data}, state ${loc.state}, logs ${loc.logs} (remove them by hand if you want them gone)`,
  );
  return {
    command: 'uninstall',
    platform: o.platform,
    dryRun: o.dryRun,
    locations: loc,
    files: removed.map((path) => ({ path, action: 'remove' })),
    commands: session.commands,
    notes: session.notes,
    failed: session.failed,
  };
}

// ---- output ---------------------------------------------------------------------------------

const shellWord = (s) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

function printHuman(result) {
  const out = [];
  const dry = result.dryRun ? ', dry run: nothing was changed' : '';
  out.push(`vigil ${result.command} (${result.platform}${dry})`);
  for (const f of result.files) out.push(`  ${f.action.padEnd(9)} ${f.path}`);
  for (const c of result.commands) {
    const how =
      c.kind === 'check'
        ? 'check'
        : c.kind === 'if-not-loaded'
          ? 'run if not loaded:'
          : result.dryRun
            ? 'run'
            : `rc ${c.rc}`;
    const tail = c.mayFail ? '   (may fail: not loaded)' : c.output ? `   (${c.output})` : '';
    out.push(`  ${how.padEnd(9)} ${c.argv.map(shellWord).join(' ')}${tail}`);
  }
  for (const n of result.notes) out.push(`  note      ${n}`);
  if (result.command === 'install' && !result.dryRun && result.failed === 0) {
    out.push(
      `configuration: ${join(result.locations.config, 'guardian.json')}, ${join(result.locations.config, 'health.json')}`,
    );
    out.push(`logs: ${result.locations.logs}   state: ${result.locations.state}   data: ${result.locations.data}`);
  }
  if (result.failed > 0) out.push(`${result.failed} command(s) failed`);
  process.stdout.write(`${out.join('\n')}\n`);
}

export async function main(argv) {
  let o;
  try {
    o = parseOptions(argv);
    if (o.help) {
      process.stdout.write(`${USAGE}\n`);
      return EXIT.OK;
    }
    const result = o.command === 'install' ? await install(o) : await uninstall(o);
    if (o.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else printHuman(result);
    return result.failed > 0 ? EXIT.FAILURE : EXIT.OK;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`install: ${err.message}\n`);
      if (!o) process.stderr.write('run deploy/install --help for the options\n');
      return EXIT.CONFIG;
    }
    process.stderr.write(`install: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.FAILURE;
  }
}

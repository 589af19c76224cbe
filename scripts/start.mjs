#!/usr/bin/env node
// vigil's whole stack on this machine, on its embedded defaults: the messaging daemon on the
// local network (no account), the relay, the inference server on a generated tiny model (made on
// first start; no download) and the guardian watching it; the health check runs every
// --health-interval seconds as cron would run it. Prints what runs where, and stops everything
// on Ctrl-C (SIGINT) or SIGTERM. `node scripts/start.mjs --help` lists the flags.
//
// This process is the supervisor of the others: it starts them, holds their pids, and obeys the
// control socket (scripts/ctl.mjs: status, start, stop, restart), which is what the guardian's
// and the health check's `command` service managers call. It does not restart the inference
// server or the daemon by itself: that is the guardian's job and the health check's.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer as createNetServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
// Built packages of this workspace: the address syntax of every binary, and the health check's
// process table (/proc on Linux, ps and lsof on macOS).
import { listenersOn, listProcesses } from '../packages/health-check/dist/index.js';
import { formatHostPort, parseHostPort } from '../packages/shared-types/dist/index.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const NODE = process.execPath;
const bin = (pkg) => join(ROOT, 'packages', pkg, 'bin', `${pkg}.js`);
const CTL = join(ROOT, 'scripts', 'ctl.mjs');

const USAGE = `Usage: pnpm start [-- options]   (or: node scripts/start.mjs [options])

Starts the vigil stack and keeps it running until Ctrl-C.

Options (each also an environment variable):
  --home <dir>               VIGIL_HOME             state, logs, model (default: .vigil/ in the repository)
  --account <number>         VIGIL_ACCOUNT          the daemon's account (default +15550000001)
  --backend <local|signal-cli> VIGIL_BACKEND        the daemon's backend (default local: the local network)
  --signal-cli <path>        VIGIL_SIGNAL_CLI       the signal-cli program (backend signal-cli)
  --signal-cli-config <dir>  VIGIL_SIGNAL_CLI_CONFIG  signal-cli's data directory (backend signal-cli)
  --daemon-http <addr>       VIGIL_DAEMON_HTTP      default 127.0.0.1:8080
  --daemon-tcp <addr>        VIGIL_DAEMON_TCP       default 127.0.0.1:7583
  --relay <addr>             VIGIL_RELAY            the relay's link address (default: 10.0.0.1:7583 when this
                                                    host has 10.0.0.1, else 127.0.0.1:7584)
  --inference <addr>         VIGIL_INFERENCE        default 127.0.0.1:1337
  --mtls <addr|off>          VIGIL_MTLS             default 127.0.0.1:1338 (certificates made on first start)
  --model <file>             VIGIL_MODEL            a GGUF model (default: a generated tiny model)
  --model-id <id>            VIGIL_MODEL_ID         the model id clients ask for (default vigil)
  --threads <n>              VIGIL_THREADS          inference threads (default: the server's own choice)
  --guardian-interval <s>    VIGIL_GUARDIAN_INTERVAL  seconds between guardian ticks (default 10 for the tiny
                                                    model; 60 with --model, which may load for longer)
  --health-interval <s>      VIGIL_HEALTH_INTERVAL  seconds between health checks (default 300; 0: never)
  -h, --help                 print this and exit

Exit codes: 0 stopped cleanly; 1 could not start (a port in use, a service that did not come up);
64 bad usage.`;

// ---- options ---------------------------------------------------------------------------------

let opts;
try {
  // `pnpm start -- --flag` passes the `--` along.
  const argv = process.argv.slice(2);
  const { values } = parseArgs({
    args: argv[0] === '--' ? argv.slice(1) : argv,
    options: {
      home: { type: 'string' },
      account: { type: 'string' },
      backend: { type: 'string' },
      'signal-cli': { type: 'string' },
      'signal-cli-config': { type: 'string' },
      'model-id': { type: 'string' },
      'daemon-http': { type: 'string' },
      'daemon-tcp': { type: 'string' },
      relay: { type: 'string' },
      inference: { type: 'string' },
      mtls: { type: 'string' },
      model: { type: 'string' },
      threads: { type: 'string' },
      'guardian-interval': { type: 'string' },
      'health-interval': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const env = process.env;
  const pick = (flag, name, def) => values[flag] ?? env[name] ?? def;
  opts = {
    home: pick('home', 'VIGIL_HOME', join(ROOT, '.vigil')),
    account: pick('account', 'VIGIL_ACCOUNT', '+15550000001'),
    backend: pick('backend', 'VIGIL_BACKEND', 'local'),
    signalCli: pick('signal-cli', 'VIGIL_SIGNAL_CLI', undefined),
    signalCliConfig: pick('signal-cli-config', 'VIGIL_SIGNAL_CLI_CONFIG', undefined),
    modelId: pick('model-id', 'VIGIL_MODEL_ID', 'vigil'),
    daemonHttp: address(pick('daemon-http', 'VIGIL_DAEMON_HTTP', '127.0.0.1:8080'), '--daemon-http'),
    daemonTcp: address(pick('daemon-tcp', 'VIGIL_DAEMON_TCP', '127.0.0.1:7583'), '--daemon-tcp'),
    relay: pick('relay', 'VIGIL_RELAY', undefined),
    inference: address(pick('inference', 'VIGIL_INFERENCE', '127.0.0.1:1337'), '--inference'),
    mtls: pick('mtls', 'VIGIL_MTLS', '127.0.0.1:1338'),
    model: pick('model', 'VIGIL_MODEL', undefined),
    threads: pick('threads', 'VIGIL_THREADS', undefined),
    // Two failed ticks restart the server: ticks must be longer than a model takes to load.
    guardianInterval: number(
      pick('guardian-interval', 'VIGIL_GUARDIAN_INTERVAL', pick('model', 'VIGIL_MODEL', undefined) ? '60' : '10'),
      '--guardian-interval',
    ),
    healthInterval: number(pick('health-interval', 'VIGIL_HEALTH_INTERVAL', '300'), '--health-interval'),
  };
  if (!['local', 'signal-cli'].includes(opts.backend))
    throw new Error(`--backend: expected local or signal-cli, got "${opts.backend}"`);
  if (opts.relay !== undefined) opts.relay = address(opts.relay, '--relay');
  if (opts.mtls !== 'off') opts.mtls = address(opts.mtls, '--mtls');
} catch (err) {
  process.stderr.write(`vigil: ${err.message}\n\n${USAGE}\n`);
  process.exit(64);
}

/** An address flag, parsed as every vigil binary parses it. */
function address(text, flag) {
  try {
    return parseHostPort(text);
  } catch (err) {
    throw new Error(`${flag}: ${err.message}`);
  }
}
function number(text, flag) {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${flag}: expected a number of seconds, got "${text}"`);
  return n;
}
const hp = formatHostPort;
const say = (line) => process.stdout.write(`${line}\n`);
const fail = (line) => {
  process.stderr.write(`vigil: ${line}\n`);
  process.exit(1);
};

// ---- the home directory -------------------------------------------------------------------------

const HOME = opts.home;
const dir = (...p) => join(HOME, ...p);
for (const d of ['', 'logs', 'state', 'run', 'models', 'signal-daemon'])
  mkdirSync(dir(d), { recursive: true, mode: 0o700 });
const STACK_FILE = dir('run', 'stack.json');
const SOCKET = dir('run', 'control.sock');

// One stack per home: a live supervisor is refused; processes left by one that died are stopped.
let stoppedLeftovers = 0;
if (existsSync(STACK_FILE)) {
  let previous = null;
  try {
    previous = JSON.parse(readFileSync(STACK_FILE, 'utf8'));
  } catch {}
  const commands = new Map((await listProcesses()).map((p) => [p.pid, p.command]));
  if (previous && commands.get(previous.pid)?.includes('start.mjs')) {
    fail(
      `vigil is already running from ${HOME} (pid ${previous.pid}); stop it with Ctrl-C in its terminal or kill -TERM ${previous.pid}`,
    );
  }
  // A pid is that service only while it runs the command recorded for it (pids are reused).
  const left = Object.entries(previous?.services ?? {}).filter(([, s]) => s?.pid && commands.get(s.pid) === s.command);
  for (const [name, { pid }] of left) {
    say(`vigil: stopping ${name} (pid ${pid}) left by a stack that did not stop cleanly`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {}
  }
  stoppedLeftovers = left.length;
}

// ---- addresses ---------------------------------------------------------------------------------

const hostHas = (ip) => Object.values(networkInterfaces()).some((list) => list?.some((i) => i.address === ip));
let relayNote = '';
if (!opts.relay) {
  if (hostHas('10.0.0.1')) opts.relay = { host: '10.0.0.1', port: 7583 };
  else {
    opts.relay = { host: '127.0.0.1', port: 7584 };
    relayNote = ' (10.0.0.1 is not on this host: listening on loopback instead; --relay to choose)';
  }
}

/**
 * Who holds a TCP port: "pid N (command)", or "" when it cannot be told. The command line is given
 * whole (an interpreter's path alone can be 60 characters, as with a Node from a version manager);
 * only a very long one (a Java classpath) is cut, after a whole word.
 */
async function holderOf(port) {
  const shown = (command) => {
    if (command.length <= 500) return command;
    const cut = command.lastIndexOf(' ', 500);
    return `${command.slice(0, cut > 0 ? cut : 500)} …`;
  };
  try {
    const pids = await listenersOn(port);
    if (pids.length === 0) return '';
    const procs = await listProcesses();
    return pids.map((pid) => `pid ${pid} (${shown(procs.find((p) => p.pid === pid)?.command ?? '?')})`).join(', ');
  } catch {
    return '';
  }
}

function bindable(addr) {
  return new Promise((resolve) => {
    const s = createNetServer();
    s.once('error', (err) => resolve(err.code));
    s.listen(addr.port, addr.host, () => s.close(() => resolve(null)));
  });
}

const LISTENERS = [
  ['--daemon-http', 'the daemon (HTTP)', opts.daemonHttp],
  ['--daemon-tcp', 'the daemon (TCP)', opts.daemonTcp],
  ['--relay', 'the relay', opts.relay],
  ['--inference', 'the inference server', opts.inference],
  ...(opts.mtls === 'off' ? [] : [['--mtls', 'the inference server (mutual TLS)', opts.mtls]]),
];
for (const [flag, what, addr] of LISTENERS) {
  if (addr.port === 0)
    fail(`${flag}: the stack needs fixed ports (the health check and the guardian are configured with them)`);
  let code = await bindable(addr);
  // A process stopped just above holds its port until it has finished exiting.
  for (const end = Date.now() + 5000; code === 'EADDRINUSE' && stoppedLeftovers > 0 && Date.now() < end; ) {
    await new Promise((r) => setTimeout(r, 50));
    code = await bindable(addr);
  }
  if (code === 'EADDRINUSE') {
    const holder = await holderOf(addr.port);
    fail(
      `port ${addr.port} (${hp(addr)}, ${what}) is already in use${holder ? ` by ${holder}` : ''}. Stop it, or give ${flag} another address.`,
    );
  }
  if (code && !(flag === '--relay' && code === 'EADDRNOTAVAIL'))
    fail(`cannot listen on ${hp(addr)} (${what}): ${code}`);
}

// ---- first start: the model and the certificates ------------------------------------------------

function runOnce(argv, what) {
  const r = spawnSync(NODE, argv, { encoding: 'utf8' });
  if (r.status !== 0) fail(`${what} failed (exit ${r.status}):\n${r.stderr || r.stdout}`);
}
const MODEL = opts.model ?? dir('models', 'tiny.gguf');
if (!opts.model && !existsSync(MODEL)) {
  say(`vigil: making the tiny model ${rel(MODEL)} (first start)`);
  runOnce([bin('inference-server'), 'make-model', '--out', MODEL, '--preset', 'tiny'], 'making the model');
}
if (!existsSync(MODEL)) fail(`the model ${MODEL} does not exist`);
const PKI = dir('pki');
if (opts.mtls !== 'off' && !existsSync(join(PKI, 'server.pem'))) {
  runOnce([bin('inference-server'), 'certs', '--out', PKI], 'making the certificates');
}

// ---- the services ------------------------------------------------------------------------------

const MODEL_ID = opts.modelId;
const log = (name) => dir('logs', `${name}.log`);
const ctl = (action, service) => [NODE, CTL, '--home', HOME, action, service];
const manager = (service) => ({
  kind: 'command',
  restart: ctl('restart', service),
  stop: ctl('stop', service),
  start: ctl('start', service),
});

const inferenceArgv = (name, extra) => [
  bin('inference-server'),
  'serve',
  '--model',
  MODEL,
  '--model-id',
  MODEL_ID,
  '--http',
  hp(opts.inference),
  ...(opts.mtls === 'off'
    ? []
    : [
        '--mtls',
        hp(opts.mtls),
        '--tls-cert',
        join(PKI, 'server.pem'),
        '--tls-key',
        join(PKI, 'server-key.pem'),
        '--tls-ca',
        join(PKI, 'ca.pem'),
      ]),
  ...(opts.threads ? ['--threads', opts.threads] : []),
  '--access-log',
  dir('logs', `${name}-access.log`),
  ...extra,
];

/** name → what it runs, whether the stack starts it, how to tell it is up, what it serves. */
const SERVICES = {
  'signal-daemon': {
    argv: [
      bin('signal-daemon'),
      '--account',
      opts.account,
      '--http',
      hp(opts.daemonHttp),
      '--tcp',
      hp(opts.daemonTcp),
      '--data-dir',
      dir('signal-daemon'),
      '--localnet',
      dir('localnet.sqlite'),
      ...(opts.backend === 'local'
        ? []
        : [
            '--backend',
            'signal-cli',
            ...(opts.signalCli ? ['--signal-cli', opts.signalCli] : []),
            ...(opts.signalCliConfig ? ['--signal-cli-config', opts.signalCliConfig] : []),
          ]),
    ],
    autostart: true,
    ready: () => httpOk(opts.daemonHttp, '/api/v1/check'),
    serves: `JSON-RPC http://${hp(opts.daemonHttp)}/api/v1/rpc, events /api/v1/events; tcp ${hp(opts.daemonTcp)}`,
    restartedBy: 'the health check',
  },
  'tcp-relay': {
    argv: [bin('tcp-relay'), '--listen', hp(opts.relay), '--target', hp(opts.daemonTcp)],
    autostart: true,
    ready: () => logHas('tcp-relay', /"msg":"(listening|listen address not on this host yet)/),
    serves: `${hp(opts.relay)} → ${hp(opts.daemonTcp)}${relayNote}`,
    restartedBy: 'the health check',
  },
  'inference-server': {
    argv: inferenceArgv('inference-server', []),
    autostart: true,
    ready: () => httpOk(opts.inference, '/health'),
    serves: `http://${hp(opts.inference)}/v1${opts.mtls === 'off' ? '' : `, mutual TLS ${hp(opts.mtls)}`} (model "${MODEL_ID}")`,
    restartedBy: 'the guardian',
  },
  'inference-fallback': {
    argv: inferenceArgv('inference-fallback', ['--gpu', 'off']),
    autostart: false,
    ready: () => httpOk(opts.inference, '/health'),
    serves: `the same addresses, CPU only (started by the guardian on fallback)`,
    restartedBy: 'the guardian',
  },
  guardian: {
    argv: [bin('guardian'), 'run', '--config', dir('guardian.json')],
    autostart: true,
    ready: () => Promise.resolve(true),
    serves: `a real completion every ${opts.guardianInterval} s; events ${rel(log('guardian'))}`,
    restartedBy: 'this supervisor (not after exit 2: an operator must act)',
  },
};
function rel(p) {
  const r = relative(process.cwd(), p);
  return r.startsWith('..') ? p : r;
}

// The guardian's and the health check's configurations for this stack (rewritten on each start).
const guardianConfig = {
  intervalS: opts.guardianInterval,
  stateFile: dir('state', 'guardian-state.json'),
  lockFile: dir('state', 'inference-fallback.lock'),
  logFile: log('guardian'),
  primary: {
    agent: 'inference-server',
    http: hp(opts.inference),
    model: MODEL_ID,
    service: manager('inference-server'),
    accessLog: dir('logs', 'inference-server-access.log'),
    log: log('inference-server'),
    binary: bin('inference-server'),
    standalone: [NODE, bin('inference-server'), '--version'],
  },
  fallback: {
    agent: 'inference-fallback',
    http: hp(opts.inference),
    model: MODEL_ID,
    service: manager('inference-fallback'),
    accessLog: dir('logs', 'inference-fallback-access.log'),
  },
};
const healthConfig = {
  daemon: {
    http: hp(opts.daemonHttp),
    // This stack's daemon: its network file and its account (other accounts may share the file).
    processMatch: [dir('localnet.sqlite'), opts.account],
    service: manager('signal-daemon'),
    log: log('signal-daemon'),
  },
  relay: { link: hp(opts.relay), service: manager('tcp-relay') },
  healthLog: dir('state', 'health.log'),
};
writeFileSync(dir('guardian.json'), `${JSON.stringify(guardianConfig, null, 2)}\n`, { mode: 0o600 });
writeFileSync(dir('health.json'), `${JSON.stringify(healthConfig, null, 2)}\n`, { mode: 0o600 });

// ---- supervision -------------------------------------------------------------------------------

/** name → { child, pid, startedAt, exits, lastExit } */
const running = new Map();
const history = new Map(Object.keys(SERVICES).map((n) => [n, { starts: 0, lastExit: null }]));
let stopping = false;

function saveStack() {
  const services = Object.fromEntries(
    [...running].map(([n, r]) => [n, { pid: r.child.pid, command: [NODE, ...SERVICES[n].argv].join(' ') }]),
  );
  writeFileSync(STACK_FILE, `${JSON.stringify({ pid: process.pid, home: HOME, services })}\n`, { mode: 0o600 });
}

function startService(name) {
  const svc = SERVICES[name];
  if (running.has(name)) return running.get(name).child.pid;
  const fd = openSync(log(name), 'a', 0o600);
  const logStart = fstatSync(fd).size;
  // Its own process group: Ctrl-C reaches this supervisor only, which stops the services in order.
  const child = spawn(NODE, svc.argv, { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const h = history.get(name);
  h.starts += 1;
  running.set(name, { child, startedAt: Date.now(), logStart });
  child.on('error', (err) => say(`vigil: ${name} could not start: ${err.message}`));
  child.on('exit', (code, signal) => {
    if (running.get(name)?.child === child) running.delete(name);
    h.lastExit = { code, signal, at: new Date().toISOString() };
    saveStack();
    if (stopping || child.expected) return;
    const how = signal ? `killed by ${signal}` : `exit ${code}`;
    if (name === 'guardian' && code === 2) {
      say(
        `vigil: the guardian stopped: manual intervention required (exit 2). See ${rel(log('guardian'))}; then\n` +
          `       node packages/guardian/bin/guardian.js reset --config ${rel(dir('guardian.json'))}   (or restore)\n` +
          `       node scripts/ctl.mjs --home ${rel(HOME)} start guardian`,
      );
    } else if (name === 'guardian') {
      const wait = Math.min(60_000, 1000 * 2 ** Math.min(h.starts, 6));
      say(`vigil: the guardian ended (${how}); starting it again in ${wait / 1000} s`);
      setTimeout(() => !stopping && !running.has('guardian') && startService('guardian'), wait).unref();
    } else {
      say(`vigil: ${name} ended (${how}); ${svc.restartedBy} brings it back`);
    }
  });
  saveStack();
  return child.pid;
}

/** SIGTERM, then SIGKILL after the grace; resolves once the process is gone. */
async function stopService(name, graceMs = 15_000) {
  const r = running.get(name);
  if (!r) return;
  r.child.expected = true;
  const gone = new Promise((resolve) => {
    if (r.child.exitCode !== null || r.child.signalCode !== null) resolve();
    else r.child.once('exit', resolve);
  });
  r.child.kill('SIGTERM');
  const t = setTimeout(() => r.child.kill('SIGKILL'), graceMs);
  await gone;
  clearTimeout(t);
  running.delete(name);
  saveStack();
}

function status() {
  return Object.keys(SERVICES).map((name) => {
    const r = running.get(name);
    const h = history.get(name);
    return {
      name,
      state: r ? 'running' : 'stopped',
      pid: r?.child.pid ?? null,
      starts: h.starts,
      lastExit: h.lastExit,
    };
  });
}

// The control socket: one JSON request per line, one JSON reply per line.
rmSync(SOCKET, { force: true });
const control = createNetServer((c) => {
  let buf = '';
  c.setEncoding('utf8');
  c.on('error', () => {});
  c.on('data', async (d) => {
    buf += d;
    if (buf.length > 4096) return c.destroy();
    const nl = buf.indexOf('\n');
    if (nl < 0) return;
    const line = buf.slice(0, nl);
    buf = '';
    let reply;
    try {
      const { action, service } = JSON.parse(line);
      if (action === 'status') reply = { ok: true, services: status() };
      else if (!(service in SERVICES))
        reply = { ok: false, error: `unknown service "${service}" (known: ${Object.keys(SERVICES).join(', ')})` };
      else if (stopping) reply = { ok: false, error: 'the stack is stopping' };
      else if (action === 'start') reply = { ok: true, pid: startService(service) };
      else if (action === 'stop') {
        await stopService(service);
        reply = { ok: true };
      } else if (action === 'restart') {
        await stopService(service);
        reply = { ok: true, pid: startService(service) };
      } else reply = { ok: false, error: `unknown action "${action}" (status, start, stop, restart)` };
    } catch (err) {
      reply = { ok: false, error: `bad request: ${err.message}` };
    }
    c.end(`${JSON.stringify(reply)}\n`);
  });
});
await new Promise((resolve, reject) => {
  control.once('error', reject);
  control.listen(SOCKET, resolve);
}).catch((err) => fail(`cannot open the control socket ${SOCKET}: ${err.message}`));

// ---- readiness -----------------------------------------------------------------------------------

function httpOk(addr, path) {
  return new Promise((resolve) => {
    const s = connect(addr.port, addr.host);
    s.setTimeout(1000, () => s.destroy());
    s.on('error', () => resolve(false));
    s.on('close', () => resolve(false));
    s.on('connect', () => s.write(`GET ${path} HTTP/1.1\r\nHost: ${hp(addr)}\r\nConnection: close\r\n\r\n`));
    s.once('data', (d) => {
      resolve(/^HTTP\/1\.[01] 200 /.test(d.toString('latin1')));
      s.destroy();
    });
  });
}
/** Whether what the running process wrote to its log so far matches. */
function logHas(name, re) {
  try {
    const text = readFileSync(log(name));
    return Promise.resolve(re.test(text.subarray(running.get(name)?.logStart ?? 0).toString('utf8')));
  } catch {
    return Promise.resolve(false);
  }
}
async function waitReady(name, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!running.has(name)) return false;
    if (await SERVICES[name].ready()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

// ---- stop ----------------------------------------------------------------------------------------

let healthTimer = null;
async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  say('vigil: stopping');
  clearInterval(healthTimer);
  // The guardian first (it must not restart what is being stopped), the daemon last.
  for (const name of ['guardian', 'tcp-relay', 'inference-fallback', 'inference-server', 'signal-daemon']) {
    await stopService(name);
  }
  control.close();
  rmSync(SOCKET, { force: true });
  rmSync(STACK_FILE, { force: true });
  say('vigil: stopped');
  process.exit(code);
}
process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
process.on('SIGHUP', () => void stopAll(0));

// ---- start -------------------------------------------------------------------------------------

for (const name of Object.keys(SERVICES)) {
  if (!SERVICES[name].autostart) continue;
  startService(name);
  const limit = name === 'inference-server' ? 120_000 : 20_000;
  if (!(await waitReady(name, limit))) {
    const tail = (() => {
      try {
        return readFileSync(log(name), 'utf8').trimEnd().split('\n').slice(-5).join('\n');
      } catch {
        return '';
      }
    })();
    process.stderr.write(
      `vigil: ${name} did not come up within ${limit / 1000} s; its log (${log(name)}) ends:\n${tail}\n`,
    );
    await stopAll(1);
  }
}

function runHealthCheck() {
  const child = spawn(NODE, [bin('health-check'), '--fix', '--quiet', '--config', dir('health.json')], {
    stdio: 'ignore',
  });
  child.on('exit', (code) => {
    if (code === 1) say(`vigil: the health check repaired something (exit 1); see ${rel(dir('state', 'health.log'))}`);
    else if (code === 2) say(`vigil: the health check needs you (exit 2); see ${rel(dir('state', 'health.log'))}`);
    else if (code !== 0 && code !== null) say(`vigil: the health check could not run (exit ${code})`);
  });
}
if (opts.healthInterval > 0) healthTimer = setInterval(runHealthCheck, opts.healthInterval * 1000);

const rows = [
  ['service', 'pid', 'serves', 'log'],
  ...Object.entries(SERVICES).map(([name, s]) => [
    name,
    String(running.get(name)?.child.pid ?? '-'),
    s.serves,
    rel(log(name)),
  ]),
  [
    'health-check',
    '-',
    opts.healthInterval > 0 ? `every ${opts.healthInterval} s, --fix` : 'not scheduled (--health-interval 0)',
    rel(dir('state', 'health.log')),
  ],
];
const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
say('');
for (const r of rows) say(`  ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ')}`);
say('');
say(`  state:    ${rel(HOME)}  (guardian state and fallback lock in state/, configs guardian.json and health.json)`);
say(`  check:    node packages/health-check/bin/health-check.js --config ${rel(dir('health.json'))}`);
say(`  control:  node scripts/ctl.mjs --home ${rel(HOME)} status|start|stop|restart SERVICE`);
say('');
say(`vigil is running (pid ${process.pid}). Press Ctrl-C to stop.`);

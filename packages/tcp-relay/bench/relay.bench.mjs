#!/usr/bin/env node
// Benchmark of the TCP relay against a direct connection and against socat, all in one run so the
// ratios mean something. Run `pnpm build` first, then:
//
//   node packages/tcp-relay/bench/relay.bench.mjs [--quick]
//   RELAY_BENCH_BYTES=256M node packages/tcp-relay/bench/relay.bench.mjs   (smaller bulk runs)
//
// Four paths to the same servers (peer.mjs server, on 127.0.0.1):
//   direct     the client connects to the server itself;
//   relay off  vigil's relay (the CLI, its own process) on 127.0.0.2 with --filter off;
//   relay on   vigil's relay on 127.0.0.3 with the method filter on (its default);
//   socat      `socat TCP-LISTEN:P,bind=127.0.0.4,reuseaddr,fork TCP:127.0.0.1:T` (installed with
//              apt-get when it is missing; "n/a" with the reason when that fails).
// The load client (peer.mjs client) and the servers are child processes too, so that the client,
// the relay and the server never share an event loop. Measures, each path in turn:
//   1. bulk throughput client->server and server->client: random bytes (no `"` or `\`: the
//      filter drops a line that could hide a refused name and is no JSON) in 64 KiB writes with
//      backpressure, 1 GiB per run each way (RELAY_BENCH_BYTES, in bytes or with a K, M or G
//      suffix, sets another size; without it, less when a quick first pass says 1 GiB would not
//      fit the time; the output says so); timed from the sender's first write to the receiver's
//      last byte (one monotonic clock for all processes);
//      With the filter on, random bytes are its worst case, not JSON-RPC: reported, no goal;
//   2. JSON-RPC throughput client->server: 256 MiB (~900,000 lines; at most RELAY_BENCH_BYTES)
//      of newline-delimited `send` requests (~200 characters of message each, 5% with an escaped
//      quote, some non-ASCII) in 64 KiB writes that split lines anywhere; the server counts the
//      bytes and lines and hashes what came (SHA-256), and each must equal what was sent: the
//      filter must not drop or change an allowed line;
//   3. round trips: one 100-byte line, wait for its echo, again; setNoDelay on every socket. One
//      connection per path, all open at once, taking turns in blocks of 250 (10,000 recorded per
//      path after 1,000 unrecorded): on a small VM the latency drifts within seconds, so the paths
//      are compared side by side. p50 and p99, and the p50 added to direct's in the same run.
// Throughput runs REPS (3) times per path, the order of the paths alternating, round trips REPS
// times for all paths; the medians are reported.
// Besides rates it reports the relay process's CPU time per GiB (from /proc; socat's includes the
// children it forks per connection): on a 2-core machine the client, the relay and the server
// share the cores, so a relay's throughput is partly the machine's; its CPU shows its own cost.
//
// It prints one table (measure | direct | relay off | relay on | socat | ratio(s) | goal | met),
// met being PASS, MISS or n/a, and the goals one per line under it.
// Goals missed are reported, not hidden; the exit code is 0 when the run completed (goals met or
// not) and 1 when something broke: it could not run, a measure failed, or bytes arrived altered. Traffic goes only to 127.0.0.0/8. Every phase is bounded in
// count and time and the whole run by a watchdog; child processes are stopped at the end, also on
// error or a signal, and kill themselves when this process goes away. No files are written.
import { fork, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { availableParallelism, cpus, platform } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@vigil/shared-types/node';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'tcp-relay.js');
const DIST = join(HERE, '..', 'dist', 'cli.js');
const PEER = join(HERE, 'peer.mjs');

const QUICK = process.argv.slice(2).includes('--quick');
const MiB = 1024 * 1024;

/** RELAY_BENCH_BYTES: `1073741824`, `256M`, `1G`, `512K` (binary units); null when not set. */
function envBytes(name) {
  const v = process.env[name];
  if (v === undefined || v === '') return null;
  const m = /^(\d+)([KMG]?)i?B?$/i.exec(v.trim());
  const n = m ? Number(m[1]) * 1024 ** ' KMG'.indexOf(m[2].toUpperCase() || ' ') : Number.NaN;
  if (!Number.isSafeInteger(n) || n < 64 * 1024) {
    process.stderr.write(`bench: ${name}=${v}: expected bytes, at least 64K (e.g. 256M, 1G)\n`);
    process.exit(1);
  }
  return n;
}
const BULK_BYTES_SET = envBytes('RELAY_BENCH_BYTES');
/** Bulk size per run and direction, in MiB: the first that the pilot pass says fits the time. */
const BULK_SIZES_MIB = BULK_BYTES_SET ? [BULK_BYTES_SET / MiB] : QUICK ? [64] : [1024, 512, 256];
const JSON_MIB = Math.min(QUICK ? 32 : 256, BULK_SIZES_MIB[0]);
const PILOT_MIB = Math.min(QUICK ? 16 : 64, BULK_SIZES_MIB[0]);
const REPS = 3;
const PING_WARMUP = QUICK ? 250 : 1000;
const PING_COUNT = QUICK ? 2000 : 10_000;
/** Round trips on one path before the next path's turn (all paths in one run, interleaved). */
const PING_BLOCK = 250;
const PING_BYTES = 100;
/** Any one transfer or ping run is cut after this. */
const OP_TIMEOUT_MS = 90_000;
const START_TIMEOUT_MS = 15_000;
/** The measuring phases are sized to end this long after the start (the pilot's estimate)... */
const PLAN_MS = 170_000;
/** ...and a watchdog stops the run at this. */
const RUN_TIMEOUT_MS = 230_000;
const GOAL_OFF_VS_DIRECT = 0.9;
const GOAL_ADDED_P50_US = 100;
const GOAL_ON_VS_OFF_JSON = 0.5;

const TARGET_HOST = '127.0.0.1';
const T_START = Date.now();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const elapsed = () => Date.now() - T_START;

// ---- child processes and cleanup -----------------------------------------------------------------

const children = new Set();
let cleaned = false;
const exited = (child) => child.exitCode !== null || child.signalCode !== null;

/** Forks peer.mjs in a role, keeping the tail of its output for error messages. */
function forkPeer(args) {
  const child = fork(PEER, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
  child.outputTail = '';
  const keep = (d) => {
    child.outputTail = (child.outputTail + d).slice(-4000);
  };
  child.stdout.setEncoding('utf8').on('data', keep);
  child.stderr.setEncoding('utf8').on('data', keep);
  child.on('error', (err) => keep(`\n${err.message}`));
  children.add(child);
  child.on('exit', () => children.delete(child));
  return child;
}

async function stopChild(child) {
  if (exited(child)) return;
  const gone = once(child, 'exit');
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 4000);
  await gone;
  clearTimeout(t);
}

async function cleanup() {
  if (cleaned) return;
  cleaned = true;
  await Promise.all([...children].map((c) => stopChild(c).catch(() => {})));
}

process.on('exit', () => {
  for (const c of children) if (!exited(c)) c.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    log(`${signal}: stopping`);
    cleanup().finally(() => process.exit(130));
  });
}

/** The next message from `child` that `match` accepts, or an error after `ms` or at its exit. */
function nextMessage(child, match, ms, what) {
  return new Promise((resolve, reject) => {
    const done = (err, value) => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (err) reject(err);
      else resolve(value);
    };
    const onMessage = (m) => {
      if (match(m)) done(null, m);
    };
    const onExit = (code, signal) =>
      done(new Error(`${what}: the process exited (${signal ?? code}): ${child.outputTail.trim() || 'no output'}`));
    const timer = setTimeout(() => done(new Error(`${what}: no answer within ${ms} ms`)), ms);
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

// ---- the servers, the client and the relays ------------------------------------------------------

/** A port free on `host` right now. */
/** Connects until something accepts on host:port (the relay at --log-level warn prints nothing). */
async function waitAccepting(host, port, child, what) {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (let i = 0; i < 1000 && Date.now() < deadline; i++) {
    if (child.relayExit) break;
    const ok = await new Promise((resolve) => {
      const s = connect({ host, port });
      s.once('connect', () => {
        s.end();
        resolve(true);
      });
      s.once('error', () => resolve(false));
      s.setTimeout(1000, () => {
        s.destroy();
        resolve(false);
      });
    });
    if (ok) return;
    await sleep(50);
  }
  const why = child.relayExit ? `it exited (${JSON.stringify(child.relayExit)})` : `nothing accepted in time`;
  throw new Error(`${what} did not start on ${host}:${port}: ${why}: ${child.outputTail.trim() || 'no output'}`);
}

/** Runs `command args` under a guard (peer.mjs guard) and waits until it accepts on host:port. */
async function startRelay(what, host, port, command, args) {
  const guard = forkPeer(['guard', command, ...args]);
  guard.relayExit = null;
  guard.on('message', (m) => {
    if (m?.type === 'exit') guard.relayExit = m;
  });
  const spawned = await nextMessage(guard, (m) => m?.type === 'spawned' || m?.type === 'exit', START_TIMEOUT_MS, what);
  if (spawned.type === 'exit') throw new Error(`${what} could not start: ${spawned.error ?? spawned.code}`);
  await waitAccepting(host, port, guard, what);
  return { guard, pid: spawned.pid };
}

/** socat on PATH, or installed once with apt-get; null and the reason when neither works. */
function findSocat() {
  const version = () => {
    const r = spawnSync('socat', ['-V'], { encoding: 'utf8', timeout: 10_000 });
    if (r.error || r.status !== 0) return null;
    return /socat version (\S+)/.exec(r.stdout)?.[1] ?? 'unknown version';
  };
  let v = version();
  if (v) return { version: v };
  log('socat is not on PATH: trying `apt-get install -y socat` once');
  const r = spawnSync('apt-get', ['install', '-y', 'socat'], { encoding: 'utf8', timeout: 120_000 });
  v = version();
  if (v) return { version: v, installed: true };
  const why = r.error
    ? r.error.message
    : `apt-get exited ${r.status}: ${(r.stderr || r.stdout).trim().split('\n').pop()}`;
  return { error: `socat not on PATH and \`apt-get install -y socat\` failed (${why})` };
}

/** User plus system CPU seconds of a process (and of its waited-for children, which is socat's forks). */
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
function cpuSeconds(pid) {
  if (!pid) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the name: state(3) ... utime(14) stime(15) cutime(16) cstime(17), 1-based in proc(5).
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

// ---- the client and the server's results ---------------------------------------------------------

let client = null;
let server = null;
let seq = 0;
let nextId = 0;
const serverResults = new Map();
const serverWaiters = new Map();

function onServerMessage(m) {
  if (m?.type !== 'result') return;
  const w = serverWaiters.get(m.id);
  if (w) {
    serverWaiters.delete(m.id);
    w(m);
  } else if (serverResults.size < 1000) serverResults.set(m.id, m);
}

function serverResult(id, ms) {
  const have = serverResults.get(id);
  if (have) {
    serverResults.delete(id);
    return Promise.resolve(have);
  }
  const result = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      serverWaiters.delete(id);
      reject(new Error(`the server reported nothing for run ${id} within ${ms} ms`));
    }, ms);
    timer.unref();
    serverWaiters.set(id, (m) => {
      clearTimeout(timer);
      resolve(m);
    });
  });
  // Not awaited when the client's side failed first: that rejection is no crash.
  result.catch(() => {});
  return result;
}

async function ask(cmd, params) {
  const s = ++seq;
  const answer = nextMessage(client, (m) => m?.type === 'done' && m.seq === s, OP_TIMEOUT_MS + 10_000, cmd);
  client.send({ cmd, seq: s, timeoutMs: OP_TIMEOUT_MS, ...params });
  const m = await answer;
  if (m.error) throw new Error(m.error);
  return m;
}

const seconds = (t0, t1) => Number(BigInt(t1) - BigInt(t0)) / 1e9;

/** Runs `fn` and measures the CPU time of the path's relay process meanwhile. */
async function withCpu(path, fn) {
  const c0 = cpuSeconds(path.pid);
  const r = await fn();
  if (path.key === 'socat') await sleep(150); // let socat reap the connection's fork
  return { ...r, cpu: cpuSeconds(path.pid) - c0 };
}

const measures = {
  up: (path, bytes) =>
    withCpu(path, async () => {
      const id = String(++nextId);
      const got = serverResult(id, OP_TIMEOUT_MS + 10_000);
      const c = await ask('send', { host: path.host, port: path.port, id, bytes });
      const s = await got;
      if (s.error) throw new Error(`server: ${s.error}`);
      if (s.bytes !== bytes) throw new Error(`the server got ${s.bytes} bytes of ${bytes}`);
      return { mibs: bytes / MiB / seconds(c.t0, s.t1), bytes };
    }),
  down: (path, bytes) =>
    withCpu(path, async () => {
      const id = String(++nextId);
      const got = serverResult(id, OP_TIMEOUT_MS + 10_000);
      const c = await ask('recv', { host: path.host, port: path.port, id, bytes });
      const s = await got;
      if (s.error) throw new Error(`server: ${s.error}`);
      if (c.bytes !== bytes) throw new Error(`the client got ${c.bytes} bytes of ${bytes}`);
      return { mibs: bytes / MiB / seconds(s.t0, c.t1), bytes };
    }),
  json: (path, bytes) =>
    withCpu(path, async () => {
      const id = String(++nextId);
      const got = serverResult(id, OP_TIMEOUT_MS + 10_000);
      const c = await ask('json', { host: path.host, port: path.port, id, bytes });
      const s = await got;
      if (s.error) throw new Error(`server: ${s.error}`);
      const intact = s.bytes === c.bytes && s.lines === c.lines && s.sha256 === c.sha256;
      const mismatch = intact
        ? ''
        : `sent ${c.bytes} B / ${c.lines} lines / sha256 ${c.sha256.slice(0, 12)}…, ` +
          `got ${s.bytes} B / ${s.lines} lines / sha256 ${s.sha256.slice(0, 12)}…`;
      const sec = seconds(c.t0, s.t1);
      return { mibs: c.bytes / MiB / sec, linesPerSec: c.lines / sec, bytes: c.bytes, intact, mismatch };
    }),
  /** Round trips on all `paths` in one run, in blocks of PING_BLOCK: one result per path. */
  pingAll: async (paths, count, warmup = PING_WARMUP) => {
    const id = String(++nextId);
    const targets = paths.map((p) => ({ host: p.host, port: p.port }));
    const r = await ask('pingAll', { targets, id, size: PING_BYTES, warmup, count, block: PING_BLOCK });
    return r.paths.map((x) => {
      if (x.n < count) throw new Error(`only ${x.n} of ${count} round trips in time`);
      return { p50: x.p50, p99: x.p99, n: x.n };
    });
  },
};

// ---- statistics and the table --------------------------------------------------------------------

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x, digits = 0) =>
  Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : '';

function printTable(rows) {
  const head = ['measure', 'direct', 'relay off', 'relay on', 'socat', 'ratio(s)', 'goal', 'met'];
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => String(r[i] ?? '').length)));
  const line = (r) =>
    r
      .map((x, i) => {
        const s = String(x ?? '');
        return i === 0 || i >= 5 ? s.padEnd(widths[i]) : s.padStart(widths[i]);
      })
      .join(' | ')
      .trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const r of rows) console.log(line(r));
}

// ---- the run -------------------------------------------------------------------------------------

async function main() {
  if (!existsSync(DIST)) throw new Error(`${DIST} is missing: run \`pnpm build\` first`);
  const cores = availableParallelism();
  console.log(
    `tcp-relay benchmark: node ${process.version}, ${cores} cores (${cpus()[0]?.model ?? 'unknown CPU'}), ${platform()}`,
  );
  if (QUICK) console.log('QUICK run (--quick): small sizes, numbers only indicative');

  // The servers and the client.
  server = forkPeer(['server']);
  server.on('message', onServerMessage);
  const { port: targetPort } = await nextMessage(server, (m) => m?.type === 'ready', START_TIMEOUT_MS, 'server');
  client = forkPeer(['client']);
  await nextMessage(client, (m) => m?.type === 'ready', START_TIMEOUT_MS, 'client');
  const target = `${TARGET_HOST}:${targetPort}`;

  // The paths.
  const paths = [
    { key: 'direct', label: 'direct', host: TARGET_HOST, port: targetPort, pid: 0 },
    { key: 'off', label: 'relay off', host: '127.0.0.2' },
    { key: 'on', label: 'relay on', host: '127.0.0.3' },
    { key: 'socat', label: 'socat', host: '127.0.0.4' },
  ];
  const byKey = Object.fromEntries(paths.map((p) => [p.key, p]));
  for (const key of ['off', 'on']) {
    const p = byKey[key];
    p.port = await freePort(p.host);
    const args = [CLI, '--listen', `${p.host}:${p.port}`, '--target', target, '--log-level', 'warn'];
    // The per-source byte budget stays on (its cost is measured) with a share no run reaches.
    args.push('--max-bytes-per-minute', String(2 ** 40));
    if (key === 'off') args.push('--filter', 'off');
    const r = await startRelay(`the relay (${p.label})`, p.host, p.port, process.execPath, args);
    Object.assign(p, r);
  }
  const socat = findSocat();
  if (socat.error) {
    byKey.socat.na = socat.error;
    log(socat.error);
  } else {
    const p = byKey.socat;
    p.port = await freePort(p.host);
    const args = [`TCP-LISTEN:${p.port},bind=${p.host},reuseaddr,fork`, `TCP:${target}`];
    Object.assign(p, await startRelay('socat', p.host, p.port, 'socat', args));
  }
  console.log(
    `socat: ${socat.error ? `n/a: ${socat.error}` : `${socat.version}${socat.installed ? ' (installed now with apt-get)' : ''}`}`,
  );
  const live = paths.filter((p) => !p.na);
  /** Errors per path and measure, reported under the table. */
  const errors = [];
  const attempt = async (path, what, fn) => {
    if (path.failed) return null;
    try {
      return await fn();
    } catch (err) {
      errors.push(`${what}, ${path.label}: ${err.message}`);
      log(`${what}, ${path.label}: FAILED: ${err.message}`);
      const relayGone = path.guard?.relayExit;
      if (relayGone) {
        path.failed = true;
        errors.push(`${path.label}: the relay process exited: ${JSON.stringify(relayGone)}`);
      }
      return null;
    }
  };

  // The JSON-RPC streams are made up front (not timed).
  const jsonInfo = await ask('json', { bytes: Math.round(JSON_MIB * MiB) });
  await ask('json', { bytes: Math.round(PILOT_MIB * MiB) });

  // Pilot pass: warms up every path (JIT, socket buffers) and estimates how long the full run takes.
  log(`pilot pass: ${fmt(PILOT_MIB, PILOT_MIB < 1 ? 2 : 0)} MiB each way and of JSON-RPC, 1,200 round trips, per path`);
  const pilot = {};
  const pilotPings = await measures.pingAll(live, 1000, 200).catch((err) => {
    errors.push(`pilot round trips: ${err.message}`);
    log(`pilot round trips: FAILED: ${err.message}`);
    return [];
  });
  for (const [i, p] of live.entries()) {
    const up = await attempt(p, 'pilot bulk c->s', () => measures.up(p, Math.round(PILOT_MIB * MiB)));
    const down = await attempt(p, 'pilot bulk s->c', () => measures.down(p, Math.round(PILOT_MIB * MiB)));
    const json = await attempt(p, 'pilot JSON-RPC', () => measures.json(p, Math.round(PILOT_MIB * MiB)));
    const ping = pilotPings[i];
    pilot[p.key] = { up, down, json, ping };
    log(
      `  ${p.label.padEnd(9)} c->s ${fmt(up?.mibs)} MiB/s, s->c ${fmt(down?.mibs)} MiB/s, ` +
        `JSON-RPC ${fmt(json?.mibs)} MiB/s, p50 ${fmt(ping?.p50)} µs`,
    );
  }
  const est = (mib) => {
    let s = 0;
    for (const p of live) {
      const q = pilot[p.key];
      s += REPS * (mib / (q.up?.mibs || 50) + mib / (q.down?.mibs || 50) + JSON_MIB / (q.json?.mibs || 20));
      s += REPS * (PING_WARMUP + PING_COUNT) * ((q.ping?.p50 || 200) * 1.3e-6);
      s += REPS * 4 * 0.4; // per-run overhead
    }
    return s * 1000;
  };
  const left = PLAN_MS - elapsed();
  const bulkMib = BULK_SIZES_MIB.find((m) => est(m) <= left) ?? BULK_SIZES_MIB[BULK_SIZES_MIB.length - 1];
  const bulkBytes = Math.round(bulkMib * MiB);
  const reduced = bulkMib < BULK_SIZES_MIB[0];
  log(
    `plan: bulk ${fmt(bulkMib, bulkMib < 1 ? 2 : 0)} MiB per run; estimated ${fmt(est(bulkMib) / 1000)} s for ${fmt(left / 1000)} s left` +
      (reduced ? ` (${BULK_SIZES_MIB[0]} MiB would take ~${fmt(est(BULK_SIZES_MIB[0]) / 1000)} s)` : ''),
  );
  console.log(
    `payloads: bulk ${fmt(bulkMib, bulkMib < 1 ? 2 : 0)} MiB per run each way, random bytes, 64 KiB writes` +
      (BULK_BYTES_SET ? ' (RELAY_BENCH_BYTES)' : '') +
      (reduced ? ` (reduced from ${BULK_SIZES_MIB[0]} MiB: the pilot pass said it would not fit the time)` : '') +
      `; JSON-RPC ${fmt(jsonInfo.bytes / MiB)} MiB = ${fmt(jsonInfo.lines)} \`send\` lines of ~${fmt(jsonInfo.bytes / jsonInfo.lines)} B ` +
      `(${fmt(jsonInfo.quoted)} with an escaped quote); round trips: ${PING_BYTES}-byte line, one at a time, ` +
      `${fmt(PING_COUNT)} per path after ${fmt(PING_WARMUP)} unrecorded, the paths taking turns in blocks of ${PING_BLOCK}`,
  );
  console.log(`runs: ${REPS} per measure, the order of the paths alternating; the median of the runs is reported`);

  // The measures: each rep visits the paths in a different order.
  const results = { up: {}, down: {}, json: {}, ping: {} };
  for (const p of live) for (const k of Object.keys(results)) results[k][p.key] = [];
  const plan = [
    ['up', 'bulk c->s', (p) => measures.up(p, bulkBytes)],
    ['down', 'bulk s->c', (p) => measures.down(p, bulkBytes)],
    ['json', 'JSON-RPC c->s', (p) => measures.json(p, Math.round(JSON_MIB * MiB))],
  ];
  let skipped = 0;
  for (const [key, what, fn] of plan) {
    for (let rep = 0; rep < REPS; rep++) {
      if (rep > 0 && elapsed() > RUN_TIMEOUT_MS - 40_000) {
        skipped++;
        log(`${what}: run ${rep + 1} skipped (time)`);
        continue;
      }
      const order = rep % 2 === 0 ? live : [...live].reverse();
      for (const p of order) {
        const r = await attempt(p, what, () => fn(p));
        if (!r) continue;
        results[key][p.key].push(r);
        const shown = `${fmt(r.mibs)} MiB/s${key === 'json' ? `, ${r.intact ? 'intact' : `ALTERED: ${r.mismatch}`}` : ''}`;
        log(`${what} run ${rep + 1}, ${p.label.padEnd(9)}: ${shown}, relay CPU ${p.pid ? `${fmt(r.cpu, 2)} s` : '-'}`);
      }
    }
  }
  // Round trips: every path in each run, so that "added" compares samples taken side by side.
  for (let rep = 0; rep < REPS; rep++) {
    const ok = live.filter((p) => !p.failed);
    if (rep > 0 && elapsed() > RUN_TIMEOUT_MS - 30_000) {
      skipped++;
      log(`round trips: run ${rep + 1} skipped (time)`);
      continue;
    }
    let rs;
    try {
      rs = await measures.pingAll(ok, PING_COUNT);
    } catch (err) {
      errors.push(`round trips, run ${rep + 1}: ${err.message}`);
      log(`round trips run ${rep + 1}: FAILED: ${err.message}`);
      continue;
    }
    const direct = rs[ok.findIndex((p) => p.key === 'direct')];
    for (const [i, p] of ok.entries()) {
      const r = { ...rs[i], added: rs[i].p50 - (direct?.p50 ?? Number.NaN) };
      results.ping[p.key].push(r);
      log(
        `round trips run ${rep + 1}, ${p.label.padEnd(9)}: p50 ${fmt(r.p50)} µs, p99 ${fmt(r.p99)} µs` +
          (p.key === 'direct' ? '' : `, p50 added ${fmt(r.added)} µs`),
      );
    }
  }

  // The table.
  const med = (key, path, field) => median((results[key][path] ?? []).map((r) => r[field]));
  const cell = (key, path, field, digits = 0) => {
    if (byKey[path].na) return 'n/a';
    const v = med(key, path, field);
    return Number.isFinite(v) ? fmt(v, digits) : 'ERR';
  };
  const cpuPerGiB = (key, path) => {
    if (path === 'direct') return '-';
    if (byKey[path].na) return 'n/a';
    const v = median((results[key][path] ?? []).map((r) => (r.cpu / r.bytes) * 1024 * MiB));
    return Number.isFinite(v) ? fmt(v, 2) : 'ERR';
  };
  const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : Number.NaN);
  const yesNo = (ok) => (ok === null ? 'n/a' : ok ? 'PASS' : 'MISS');
  const rows = [];
  const goals = [];
  for (const [key, name] of [
    ['up', 'bulk c->s MiB/s'],
    ['down', 'bulk s->c MiB/s'],
  ]) {
    const d = med(key, 'direct', 'mibs');
    const off = med(key, 'off', 'mibs');
    const s = byKey.socat.na ? Number.NaN : med(key, 'socat', 'mibs');
    const rd = ratio(off, d);
    const rs = ratio(off, s);
    const metDirect = Number.isFinite(rd) ? rd >= GOAL_OFF_VS_DIRECT : false;
    const metSocat = byKey.socat.na ? null : Number.isFinite(rs) ? rs >= 1 : false;
    const met = metDirect && metSocat !== false;
    rows.push([
      name,
      cell(key, 'direct', 'mibs'),
      cell(key, 'off', 'mibs'),
      cell(key, 'on', 'mibs'),
      cell(key, 'socat', 'mibs'),
      `off/direct ${fmt(rd, 2)}, off/socat ${byKey.socat.na ? 'n/a' : fmt(rs, 2)}, on/direct ${fmt(ratio(med(key, 'on', 'mibs'), d), 2)}`,
      `off >= ${GOAL_OFF_VS_DIRECT}x direct and >= socat`,
      `${yesNo(met)}${metSocat === null ? ' (socat n/a)' : ''}`,
    ]);
    goals.push([`relay off ${name.slice(5, 9)} >= ${GOAL_OFF_VS_DIRECT}x direct`, metDirect]);
    goals.push([`relay off ${name.slice(5, 9)} >= socat`, metSocat]);
  }
  {
    const off = med('json', 'off', 'mibs');
    const on = med('json', 'on', 'mibs');
    const r = ratio(on, off);
    const met = Number.isFinite(r) && r >= GOAL_ON_VS_OFF_JSON;
    rows.push([
      'JSON-RPC c->s MiB/s',
      cell('json', 'direct', 'mibs'),
      cell('json', 'off', 'mibs'),
      cell('json', 'on', 'mibs'),
      cell('json', 'socat', 'mibs'),
      `on/off ${fmt(r, 2)}, off/direct ${fmt(ratio(off, med('json', 'direct', 'mibs')), 2)}`,
      `on >= ${GOAL_ON_VS_OFF_JSON}x off`,
      yesNo(met),
    ]);
    goals.push([`relay on JSON-RPC >= ${GOAL_ON_VS_OFF_JSON}x relay off`, met]);
    rows.push([
      'JSON-RPC c->s k lines/s',
      cell('json', 'direct', 'linesPerSec') === 'ERR' ? 'ERR' : fmt(med('json', 'direct', 'linesPerSec') / 1000),
      ...['off', 'on', 'socat'].map((k) => (byKey[k].na ? 'n/a' : fmt(med('json', k, 'linesPerSec') / 1000) || 'ERR')),
      '',
      '',
      '',
    ]);
    const intact = (k) => {
      if (byKey[k].na) return 'n/a';
      const rs = results.json[k] ?? [];
      if (rs.length === 0) return 'ERR';
      return rs.every((x) => x.intact) ? `ok ${rs.length}/${rs.length}` : `BAD ${rs.filter((x) => !x.intact).length}`;
    };
    const allIntact = live.every(
      (p) => (results.json[p.key] ?? []).length > 0 && results.json[p.key].every((x) => x.intact),
    );
    rows.push([
      'JSON-RPC intact (bytes, lines, sha256)',
      intact('direct'),
      intact('off'),
      intact('on'),
      intact('socat'),
      '',
      'every line arrives unchanged',
      yesNo(allIntact),
    ]);
    goals.push(['JSON-RPC arrives unchanged on every path', allIntact]);
  }
  {
    const d50 = med('ping', 'direct', 'p50');
    /** The median over the runs of (p50 of the path - p50 of direct, in the same run). */
    const added = (k) => (byKey[k].na ? Number.NaN : med('ping', k, 'added'));
    rows.push([
      'round trip p50 µs',
      cell('ping', 'direct', 'p50'),
      cell('ping', 'off', 'p50'),
      cell('ping', 'on', 'p50'),
      cell('ping', 'socat', 'p50'),
      '',
      '',
      '',
    ]);
    rows.push([
      'round trip p99 µs',
      cell('ping', 'direct', 'p99'),
      cell('ping', 'off', 'p99'),
      cell('ping', 'on', 'p99'),
      cell('ping', 'socat', 'p99'),
      '',
      '',
      '',
    ]);
    const metOff = Number.isFinite(added('off')) && added('off') <= GOAL_ADDED_P50_US;
    const metOn = Number.isFinite(added('on')) && added('on') <= GOAL_ADDED_P50_US;
    rows.push([
      'added p50 µs (path - direct)',
      Number.isFinite(d50) ? '0' : 'ERR',
      fmt(added('off')) || 'ERR',
      fmt(added('on')) || 'ERR',
      byKey.socat.na ? 'n/a' : fmt(added('socat')) || 'ERR',
      '',
      `off and on <= ${GOAL_ADDED_P50_US} µs`,
      yesNo(metOff && metOn),
    ]);
    goals.push([`relay off added round-trip p50 <= ${GOAL_ADDED_P50_US} µs`, metOff]);
    goals.push([`relay on added round-trip p50 <= ${GOAL_ADDED_P50_US} µs`, metOn]);
  }
  for (const [key, name] of [
    ['up', 'relay CPU s/GiB, bulk c->s'],
    ['down', 'relay CPU s/GiB, bulk s->c'],
    ['json', 'relay CPU s/GiB, JSON-RPC'],
  ]) {
    const off = median((results[key].off ?? []).map((r) => r.cpu / r.bytes));
    const on = median((results[key].on ?? []).map((r) => r.cpu / r.bytes));
    const s = byKey.socat.na ? Number.NaN : median((results[key].socat ?? []).map((r) => r.cpu / r.bytes));
    rows.push([
      name,
      cpuPerGiB(key, 'direct'),
      cpuPerGiB(key, 'off'),
      cpuPerGiB(key, 'on'),
      cpuPerGiB(key, 'socat'),
      `on/off ${fmt(ratio(on, off), 2)}${byKey.socat.na ? '' : `, off/socat ${fmt(ratio(off, s), 2)}`}`,
      '',
      '',
    ]);
  }
  console.log('');
  printTable(rows);
  console.log('');
  console.log('goals:');
  for (const [name, ok] of goals) console.log(`  ${yesNo(ok).padEnd(4)}  ${name}`);
  console.log(`  ${goals.filter(([, ok]) => ok === true).length} of ${goals.length} met`);
  if (skipped > 0) console.log(`note: ${skipped} measure run(s) skipped to stay within the time limit`);
  console.log(
    "note: relay on, bulk c->s: random bytes are not the filter's traffic: a newline every ~256 B, chunks " +
      'that rarely end at one, lines it frames and searches as it would JSON-RPC; no goal',
  );
  if (cores <= 2) {
    console.log(
      `note: ${cores} cores for client, server and relay (3 busy processes through a relay, 2 direct): ` +
        'relayed throughput is partly bounded by the machine; "relay CPU s/GiB" shows the relay\'s own cost',
    );
  }
  if (errors.length > 0) {
    console.log('errors:');
    for (const e of errors) console.log(`  ${e}`);
  }
  for (const p of paths.filter((x) => x.guard)) {
    if (p.guard.relayExit) console.log(`note: ${p.label} exited during the run: ${JSON.stringify(p.guard.relayExit)}`);
  }
  console.log(`time: ${fmt(elapsed() / 1000, 1)} s`);
  const altered = live.some((p) => (results.json[p.key] ?? []).some((x) => !x.intact));
  const broken = errors.length > 0 || altered || paths.some((x) => x.guard?.relayExit);
  if (broken) console.log('something broke (errors, altered bytes or an exited relay above): exit code 1');
  return broken;
}

const watchdog = setTimeout(() => {
  log(`watchdog: the run took longer than ${RUN_TIMEOUT_MS / 1000} s; stopping`);
  cleanup().finally(() => process.exit(1));
}, RUN_TIMEOUT_MS);
watchdog.unref();

try {
  const broken = await main();
  await cleanup();
  process.exitCode = broken ? 1 : 0;
} catch (err) {
  log(`error: ${err instanceof Error ? err.message : String(err)}`);
  await cleanup();
  process.exitCode = 1;
}
clearTimeout(watchdog);

#!/usr/bin/env node
// Is the model list fast while the model works? `GET /v1/models` latency during a generation,
// with the generation threads as ordinary threads (`--worker-sched normal`, the baseline), at
// SCHED_IDLE (`--worker-sched idle`, the default) and, for each --nice N, ordinary at nice N;
// in one run so the ratios mean something; and what each costs in tokens/s. Run `pnpm build`
// first, then:
//
//   node packages/inference-server/bench/model-list.bench.mjs [--preset small|tiny] [--rounds 3]
//     [--tokens 200] [--interval 20] [--threads 2] [--nice N]... [--json]
//
// It writes the model (default `small`, f16) into a temporary directory and starts one server
// per setting (--threads and --batch-threads alike, one sequence). Each
// round, the servers in rotating order: one completion of --tokens tokens alone (tokens/s), then
// the same completion while a client asks `GET /v1/models` every --interval ms on one kept-alive
// connection (latency of each, from sending to the end of the reply; tokens/s beside it), and
// the same of a bare Node server answering the same list (bare-models-server.mjs: the host's
// floor under the same load). Goal: p99 < 5 ms during a generation. Latencies of all rounds are pooled; tokens/s are medians.
// The host's load average is printed at the start and the end: on a shared host the tail is
// the scheduler's. Exit 0 when the run completed, 1 when it could not run; traffic only to
// 127.0.0.1; the servers and the temporary directory are removed at the end.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { guardRun } from './run-guard.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const BARE = join(HERE, 'bare-models-server.mjs');
const { makeModel, listThreads } = await import('../dist/index.js');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : def;
};
const PRESET = flag('--preset', 'small');
const ROUNDS = Number(flag('--rounds', '3'));
const TOKENS = Number(flag('--tokens', '200'));
const INTERVAL_MS = Number(flag('--interval', '20'));
const THREADS = flag('--threads', '2');
/** The settings compared: the baseline first, the default last (the ratio column is last / first). */
const SETTINGS = [
  { label: 'normal', flags: ['--worker-sched', 'normal'] },
  ...args.flatMap((a, i) =>
    a === '--nice' && args[i + 1]
      ? [{ label: `nice ${args[i + 1]}`, flags: ['--worker-sched', 'normal', '--worker-nice', args[i + 1]] }]
      : [],
  ),
  { label: 'idle', flags: ['--worker-sched', 'idle'] },
];
const JSON_OUT = args.includes('--json');
const GOAL_P99_MS = 5;

const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const median = (xs) => sorted(xs)[Math.floor((xs.length - 1) / 2)];
const pct = (xs, p) => sorted(xs)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

let tmp = null;
const servers = [];
let bareChild = null;
let barePort = 0;
const cleanup = () => {
  for (const c of [...servers.map((s) => s.child), bareChild]) if (c && c.exitCode === null) c.kill('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
};
guardRun(cleanup, 590_000, log, 'the run took too long; stopping');

function http(port, agent, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {};
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

async function startServer(model, setting) {
  const child = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      ...[
        '--model',
        model,
        '--model-id',
        'm',
        '--http',
        '127.0.0.1:0',
        '--context-size',
        String(Math.max(2048, TOKENS + 256)),
      ],
      ...[
        '--parallel',
        '1',
        '--request-timeout',
        '580',
        '--threads',
        THREADS,
        '--batch-threads',
        THREADS,
        ...setting.flags,
      ],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const s = { child, label: setting.label, port: 0, agent: new Agent({ keepAlive: true, maxSockets: 1 }) };
  servers.push(s);
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (x) => {
    out += x;
  });
  child.stderr.resume();
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const listening = out.split('\n').find((l) => l.includes('"msg":"listening"'));
    if (listening) s.port = Number(JSON.parse(listening).http.split(':').pop());
    if (s.port && out.includes('"msg":"model loaded"')) return s;
    if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('server did not load the model in time');
}

/** A server's threads: the main thread's policy/nice, then how many of the others have each. */
function threadNices(pid) {
  const threads = listThreads(pid);
  const others = {};
  const key = (t) => `${t.policy === 5 ? 'idle' : t.policy === 0 ? 'other' : `policy ${t.policy}`}/${t.nice}`;
  for (const t of threads) if (t.tid !== pid) others[key(t)] = (others[key(t)] ?? 0) + 1;
  const main = threads.find((t) => t.tid === pid);
  return { main: main ? key(main) : '?', others };
}

const body = { model: 'm', messages: [{ role: 'user', content: 'Tell me about the river.' }], temperature: 0 };

/** GET /v1/models on `port` every INTERVAL_MS on one kept-alive connection until `done()`: the latencies, ms. */
async function pollModels(port, done, offsetMs = 0) {
  const latencies = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  await http(port, agent, 'GET', '/v1/models'); // the connection is open before timing
  // The bare server's client asks half an interval later: the two clients of this process never
  // wait for each other.
  if (offsetMs) await new Promise((res) => setTimeout(res, offsetMs));
  const t0 = now();
  for (let k = 1; !done(); k++) {
    const sent = now();
    const r = await http(port, agent, 'GET', '/v1/models');
    latencies.push(now() - sent);
    if (r.status !== 200) throw new Error(`/v1/models: HTTP ${r.status}`);
    const wait = t0 + k * INTERVAL_MS - now();
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
  }
  agent.destroy();
  return latencies;
}

/**
 * One completion of TOKENS tokens; with `poll`, the model list asked of the server, and of the
 * bare Node server beside it (the host's floor under the same load), while it runs.
 */
async function round(s, poll) {
  let done = false;
  const polls = poll ? [pollModels(s.port, () => done), pollModels(barePort, () => done, INTERVAL_MS / 2)] : [];
  const t0 = now();
  const r = await http(s.port, s.agent, 'POST', '/v1/chat/completions', { ...body, max_tokens: TOKENS });
  const ms = now() - t0;
  done = true;
  const [latencies = [], bare = []] = await Promise.all(polls);
  if (r.status !== 200) throw new Error(`completion: HTTP ${r.status}: ${r.text}`);
  return { tps: (JSON.parse(r.text).usage.completion_tokens / ms) * 1000, latencies, bare };
}

/** The bare Node server answering the same list (bare-models-server.mjs); its port. */
async function startBare() {
  const bare = spawn(process.execPath, [BARE], { stdio: ['ignore', 'pipe', 'inherit'] });
  bareChild = bare;
  return new Promise((resolve, reject) => {
    bare.stdout.setEncoding('utf8');
    bare.stdout.once('data', (x) => resolve(Number(x.trim())));
    bare.once('exit', (code) => reject(new Error(`the bare server exited with ${code}`)));
  });
}

try {
  tmp = mkdtempSync(join(tmpdir(), 'vigil-model-list-bench-'));
  const model = join(tmp, 'model.gguf');
  await makeModel({ out: model, preset: PRESET, type: 'f16', seed: 1 });
  for (const setting of SETTINGS) await startServer(model, setting);
  barePort = await startBare();
  const loadStart = load();
  log(`${PRESET}, ${TOKENS} tokens, ${ROUNDS} rounds, threads ${THREADS}, every ${INTERVAL_MS} ms; load ${loadStart}`);
  for (const s of servers) log(`warm-up, ${s.label}: ${(await round(s, false)).tps.toFixed(1)} tokens/s`);
  const runs = new Map(servers.map((s) => [s, { alone: [], polled: [], latencies: [], p99s: [], bare: [] }]));
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < servers.length; i++) {
      const s = servers[(i + r) % servers.length];
      const run = runs.get(s);
      run.alone.push((await round(s, false)).tps);
      const p = await round(s, true);
      run.polled.push(p.tps);
      run.latencies.push(...p.latencies);
      run.bare.push(...p.bare);
      run.p99s.push(pct(p.latencies, 99));
      log(`round ${r + 1}, ${s.label}: p99 ${pct(p.latencies, 99).toFixed(2)} ms, ${p.tps.toFixed(1)} tokens/s`);
    }
  }
  const loadEnd = load();
  const base = runs.get(servers[0]);
  const rows = [['measure', ...servers.map((s) => s.label), `ratio (${servers.at(-1).label} / normal)`, 'goal', 'met']];
  const row = (name, f, digits, goal = '', met = null) => {
    const xs = servers.map((s) => f(runs.get(s)));
    const last = xs[xs.length - 1];
    rows.push([name, ...xs.map((x) => x.toFixed(digits)), (last / xs[0]).toFixed(3), goal, met?.(last) ?? '']);
  };
  row('/v1/models p50 ms', (r) => median(r.latencies), 3);
  row(
    '/v1/models p99 ms (all rounds)',
    (r) => pct(r.latencies, 99),
    3,
    `< ${GOAL_P99_MS}`,
    (x) => (x < GOAL_P99_MS ? 'yes' : 'NO'),
  );
  row('/v1/models p99 ms (worst round)', (r) => Math.max(...r.p99s), 3);
  row('/v1/models max ms', (r) => Math.max(...r.latencies), 3);
  row('bare Node server beside it: p50 ms', (r) => median(r.bare), 3);
  row('bare Node server beside it: p99 ms', (r) => pct(r.bare, 99), 3);
  row('tokens/s while polled (median)', (r) => median(r.polled), 1);
  row('tokens/s alone (median)', (r) => median(r.alone), 1);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  for (const r of rows) console.log(r.map((c, i) => String(c).padEnd(widths[i])).join(' | '));
  console.log(
    `samples per server: ${base.latencies.length}; load average ${loadStart} at the start, ${loadEnd} at the end`,
  );
  const threads = servers.map((s) => ({ label: s.label, ...threadNices(s.child.pid) }));
  console.log(
    `threads, policy/nice (main; others): ${threads.map((t) => `${t.label}: ${t.main}; ${JSON.stringify(t.others)}`).join('  ')}`,
  );
  if (JSON_OUT) {
    const summary = servers.map((s) => {
      const r = runs.get(s);
      return {
        setting: s.label,
        p50_ms: median(r.latencies),
        p99_ms: pct(r.latencies, 99),
        bare_p99_ms: pct(r.bare, 99),
        round_p99_ms: r.p99s,
        tps_polled: r.polled,
        tps_alone: r.alone,
      };
    });
    console.log(JSON.stringify({ preset: PRESET, tokens: TOKENS, threads: THREADS, loadStart, loadEnd, summary }));
  }
  cleanup();
  process.exit(0);
} catch (err) {
  log(`could not run: ${err.message}`);
  cleanup();
  process.exit(1);
}

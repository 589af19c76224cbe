#!/usr/bin/env node
// Memory stays bounded under many conversations: the saved-state cache and the server's RSS.
// Run `pnpm build` first, then `pnpm bench memory` (also part of `pnpm bench inference`), or:
//
//   node packages/inference-server/bench/memory.bench.mjs [--conversations N] [--turns N]
//        [--cache-mib N] [--clients N] [--quick] [--json]
//
// It writes the tiny model into a temporary directory and starts the server on it as a child
// process (--parallel 2, --state-cache-mib CACHE, its states in the run's directory). CONVERSATIONS
// conversations (default 50) of TURNS turns each (default 20: 1,000 requests) are played turn by
// turn across all conversations, CLIENTS (default 4) requests at a time, so that every turn finds
// its conversation evicted from the slots: it is restored from a saved state or evaluated again.
// Every 20 ms the run reads the server's RSS (/proc/PID/status) and the bytes of the state files
// on disk; after each request, /metrics' inference_state_cache_bytes.
//
// Checked (exit 1 when broken): the state files and the gauge never exceed --state-cache-mib;
// the peak RSS stays within the RSS after the first turn of every conversation (model, contexts,
// the process itself) plus the cache's bound plus 32 MiB (the JavaScript heap grows and shrinks
// with its garbage collection by about that much; the states themselves are files, on /dev/shm
// by default: RAM, but not the process's RSS); and RSS does not creep: the median of the last
// tenth of the requests is within 32 MiB of the median of the second tenth. Linux only (/proc).
//
// Traffic goes only to 127.0.0.1; the child and the temporary directory are removed at the end,
// also on error; a watchdog bounds the run. Exit 0 when the run completed within the bounds.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { guardRun } from './run-guard.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const { makeModel } = await import('../dist/index.js');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? Number(args[i + 1]) : def;
};
const QUICK = args.includes('--quick');
const JSON_OUT = args.includes('--json');
const CONVERSATIONS = flag('--conversations', QUICK ? 10 : 50);
const TURNS = flag('--turns', QUICK ? 10 : 20);
const CACHE_MIB = flag('--cache-mib', QUICK ? 2 : 8);
const CLIENTS = flag('--clients', 4);
/** The JavaScript heap's own ups and downs, and the most RSS may creep over the run. */
const SLACK_BYTES = 32 * 1024 * 1024;
const RUN_TIMEOUT_MS = 1_800_000;
const MIB = 1024 * 1024;

const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.floor(s.length / 2)];
};

let tmp = null;
let child = null;
function cleanup() {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
}
guardRun(cleanup, RUN_TIMEOUT_MS, log);

function http(port, method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        headers: data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {},
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const WORDS = 'the river stone cloud green blue house tree open close start stop good new old great little'.split(' ');
/** A user message of `n` words, different for each (conversation, turn). */
function userTurn(c, t, n = 30) {
  const out = [];
  let x = (c + 1) * 7919 + (t + 1) * 104729;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}

function rssBytes(pid) {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

function dirBytes(dir) {
  let n = 0;
  for (const f of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!f.isFile()) continue;
    try {
      n += statSync(join(f.parentPath ?? f.path, f.name)).size;
    } catch {
      // removed meanwhile
    }
  }
  return n;
}

const gauge = (metrics, name) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1] ?? Number.NaN);

async function start(model, states) {
  const argv = [CLI, 'serve', '--model', model, '--model-id', 'bench', '--http', '127.0.0.1:0', '--parallel', '2']
    .concat(['--threads', '1', '--context-size', '4096', '--max-queue', String(CLIENTS * 2)])
    .concat(['--state-cache-mib', String(CACHE_MIB), '--state-cache-dir', states]);
  child = spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s) => {
    out = (out + s).slice(-4000);
  });
  const port = await new Promise((resolve, reject) => {
    let buf = '';
    child.stdout.on('data', (s) => {
      buf += s;
      const line = buf.split('\n').find((l) => l.includes('"msg":"listening"') && l.endsWith('}'));
      if (line) resolve(Number(/:(\d+)$/.exec(JSON.parse(line).http)?.[1]));
      out = (out + s).slice(-4000);
    });
    child.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${out}`)));
  });
  const deadline = Date.now() + 120_000;
  while ((await http(port, 'GET', '/health').catch(() => ({ status: 0 }))).status !== 200) {
    if (Date.now() > deadline) throw new Error(`the server is not ready after 120 s:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return port;
}

async function main() {
  if (!existsSync('/proc/self/status')) throw new Error('this benchmark reads /proc: Linux only');
  tmp = mkdtempSync(join(tmpdir(), 'vigil-memory-bench-'));
  const model = join(tmp, 'tiny.gguf');
  await makeModel({ out: model, preset: 'tiny' });
  const states = join(tmp, 'states');
  const port = await start(model, states);
  const bound = CACHE_MIB * MIB;
  log(`${CONVERSATIONS} conversations x ${TURNS} turns, ${CLIENTS} at a time, --state-cache-mib ${CACHE_MIB}`);

  // Samples every 20 ms: RSS and the state files' bytes.
  let peakDir = 0;
  let peakRss = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peakDir = Math.max(peakDir, dirBytes(states));
      peakRss = Math.max(peakRss, rssBytes(child.pid));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  const history = Array.from({ length: CONVERSATIONS }, (_, c) => [
    { role: 'system', content: `You are agent ${c + 1}. ${userTurn(500 + c, 0, 12)}` },
  ]);
  const total = CONVERSATIONS * TURNS;
  const rssAfter = new Array(total).fill(0);
  let peakGauge = 0;
  let cachedTokens = 0;
  let promptTokens = 0;
  let baseline = 0;
  let next = 0;
  const t0 = Date.now();
  /** One client: takes the next request of the schedule (turn by turn, conversation by conversation). */
  async function client() {
    for (let i = next++; i < total; i = next++) {
      const t = Math.floor(i / CONVERSATIONS);
      const c = i % CONVERSATIONS;
      // A conversation's turn waits for its previous answer (at most CLIENTS requests behind).
      while (history[c].length !== 1 + 2 * t) await new Promise((r) => setTimeout(r, 2));
      history[c].push({ role: 'user', content: userTurn(c, t) });
      const body = { model: 'bench', messages: history[c], max_tokens: 8, temperature: 0 };
      const r = await http(port, 'POST', '/v1/chat/completions', body);
      if (r.status !== 200) throw new Error(`request ${i}: HTTP ${r.status} ${r.text.slice(0, 200)}`);
      const j = JSON.parse(r.text);
      promptTokens += j.usage.prompt_tokens;
      cachedTokens += j.usage.prompt_tokens_details?.cached_tokens ?? 0;
      history[c].push({ role: 'assistant', content: j.choices[0].message.content ?? '' });
      const metrics = (await http(port, 'GET', '/metrics')).text;
      peakGauge = Math.max(peakGauge, gauge(metrics, 'inference_state_cache_bytes'));
      rssAfter[i] = rssBytes(child.pid);
      // "Model and contexts": RSS once every conversation had its first turn.
      if (i === CONVERSATIONS - 1) baseline = rssAfter[i];
      if ((i + 1) % 100 === 0) log(`${i + 1} of ${total} requests, RSS ${(rssAfter[i] / MIB).toFixed(1)} MiB`);
    }
  }
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const seconds = (Date.now() - t0) / 1000;
  sampling = false;
  await sampler;
  const metrics = (await http(port, 'GET', '/metrics')).text;
  const tenth = Math.max(1, Math.floor(total / 10));
  const early = median(rssAfter.slice(tenth, 2 * tenth));
  const late = median(rssAfter.slice(total - tenth));
  const rows = {
    requests: total,
    seconds,
    cacheBoundBytes: bound,
    peakStateFileBytes: peakDir,
    peakStateGaugeBytes: peakGauge,
    saves: gauge(metrics, 'inference_state_saves_total'),
    restores: gauge(metrics, 'inference_state_restores_total'),
    evictions: gauge(metrics, 'inference_state_evictions_total'),
    cachedShare: cachedTokens / Math.max(1, promptTokens),
    modelBytes: statSync(model).size,
    baselineRss: baseline,
    peakRss,
    earlyRss: early,
    lateRss: late,
  };
  const checks = [
    ['state files <= --state-cache-mib', peakDir <= bound],
    ['inference_state_cache_bytes <= --state-cache-mib', peakGauge <= bound],
    ['peak RSS <= RSS after first turns + cache bound + 32 MiB', peakRss <= baseline + bound + SLACK_BYTES],
    ['RSS of the last tenth within 32 MiB of the second tenth', late - early <= SLACK_BYTES],
    ['the cache was used and evicted', rows.restores > 0 && rows.evictions > 0],
  ];
  const mib = (b) => `${(b / MIB).toFixed(1)} MiB`;
  const lines = [
    '| requests | conversations | time | state files (peak) | state gauge (peak) | bound | saves / restores / evictions | cached share | model file | RSS after first turns | peak RSS | RSS 2nd tenth → last tenth |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    `| ${total} | ${CONVERSATIONS} | ${seconds.toFixed(0)} s | ${mib(peakDir)} | ${mib(peakGauge)} | ${mib(bound)} | ${rows.saves} / ${rows.restores} / ${rows.evictions} | ${(rows.cachedShare * 100).toFixed(0)}% | ${mib(rows.modelBytes)} | ${mib(baseline)} | ${mib(peakRss)} | ${mib(early)} → ${mib(late)} |`,
    '',
    ...checks.map(([what, ok]) => `- ${ok ? 'ok' : 'BROKEN'}: ${what}`),
  ];
  console.log(lines.join('\n'));
  if (JSON_OUT) console.log(JSON.stringify(rows, null, 2));
  return checks.every(([, ok]) => ok);
}

main().then(
  (ok) => {
    cleanup();
    process.exit(ok ? 0 : 1);
  },
  (err) => {
    log(`failed: ${err.stack ?? err}`);
    cleanup();
    process.exit(1);
  },
);

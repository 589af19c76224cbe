#!/usr/bin/env node
// Benchmark of prompt-prefix reuse: agents' conversations interleaved on --parallel 2 slots.
// Run `pnpm build` first, then `pnpm bench prefix` (or `pnpm bench inference`, which runs every
// benchmark of this package), or:
//
//   node packages/inference-server/bench/prefix.bench.mjs [--turns N] [--threads N] [--batch-threads N]
//        [--type f16|q8_0|f32] [--quick] [--json]
//
// It writes the `small` model (~100 M parameters; weights f16 unless --type says otherwise) into a
// temporary directory and starts the server on it as a child process (--parallel 2). For 2 and then
// 4 conversations it plays TURNS turns round-robin (each turn adds a user message of ~170 tokens
// and the model's answer of 16 tokens, temperature 0), and measures the time to first token (TTFT,
// streaming) of the last two turns of every conversation ("warm"), then the same final prompts with
// a different first message ("cold": nothing of them is cached anywhere). The ratio cold / warm is
// what prefix reuse gains; goals >= 5x with 2 conversations, >= 3x with 4 (more conversations than
// slots: the saved-state cache). With the anchor, both servers are up side by side and take turns:
// every request goes to each, the first of the two alternating (each has its own copy of the
// conversations), so that drift of the machine during the run moves both alike. The
// 4-conversation run is repeated with --state-cache-mib 0 (vigil alone) to show what the cache
// adds. Generation tokens/s (one completion of 128 tokens) is measured with both servers up side
// by side, in blocks of 3 completions on each, alternating (3 blocks each, 2 with --quick). It
// prints one table (vigil, llama-server, their ratio, each goal), node-llama-cpp's binary the server
// ran, and the load average at the start and the end of the run: figures from a loaded machine are
// not final. On float weights with the prebuilt binary a note says what the TTFT ratios measure.
//
// The anchor: llama-server built from the llama.cpp source node-llama-cpp ships, whose path is
// given in LLAMA_SERVER (nothing is built here; when absent the run says so). It gets the same
// GGUF, threads (-t and -tb) and slots (--parallel 2, -c 2 x context) and the same conversations.
//
// Traffic goes only to 127.0.0.1; children and the temporary directory are removed at the end,
// also on error; a watchdog bounds the run. Exit 0 when the run completed, 1 when it could not, 2 on
// a bad flag.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, inferenceClient } from '@vigil/shared-types/node';
import { guardRun } from './run-guard.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const { makeModel, defaultThreads, physicalCores } = await import('../dist/index.js');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : def;
};
const QUICK = args.includes('--quick');
const JSON_OUT = args.includes('--json');
const TURNS = Number(flag('--turns', QUICK ? '4' : '6'));
const THREADS = Number(flag('--threads', String(defaultThreads())));
// Threads for a batch (a prompt): the server's own default unless --threads or --batch-threads
// says otherwise; llama-server's -tb gets the same.
const BATCH_THREADS = Number(
  flag('--batch-threads', args.includes('--threads') ? String(THREADS) : String(Math.max(THREADS, physicalCores()))),
);
const TYPE = flag('--type', 'f16');
if (!['f16', 'q8_0', 'f32'].includes(TYPE)) {
  process.stderr.write(`bench: --type takes f16, q8_0 or f32, not ${TYPE}\n`);
  process.exit(2);
}
const CONTEXT = 4096;
const ANSWER_TOKENS = 16;
const GEN_TOKENS = QUICK ? 48 : 128;
/** Generation: this many blocks on each server, alternating, each of GEN_BLOCK measured completions. */
const GEN_BLOCKS = QUICK ? 2 : 3;
const GEN_BLOCK = 3;
const RUN_TIMEOUT_MS = 1_500_000;
const LLAMA_SERVER = process.env.LLAMA_SERVER ?? '';

const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

let tmp = null;
const children = [];
let cleaned = false;
function cleanup() {
  if (cleaned) return;
  cleaned = true;
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}
guardRun(cleanup, RUN_TIMEOUT_MS, log);

// A new connection per request (loopback: a fraction of a millisecond against TTFTs of hundreds):
// llama-server closes kept-alive connections on its own schedule, and a reused closed socket fails.
const agent = new Agent({ keepAlive: false, maxSockets: 16 });

/** A streaming completion: time to the first content, the text, and the usage when given. */
function stream(port, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
    const t0 = now();
    let first = null;
    let buf = '';
    let text = '';
    let usage = null;
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`HTTP ${res.statusCode}`));
          return;
        }
        res.on('data', (c) => {
          buf += c.toString('utf8');
          let i = buf.indexOf('\n\n');
          while (i >= 0) {
            const line = buf.slice(0, i).trim();
            buf = buf.slice(i + 2);
            i = buf.indexOf('\n\n');
            if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
            const ev = JSON.parse(line.slice(6));
            const piece = ev.choices?.[0]?.delta?.content;
            if (piece) {
              if (first === null) first = now() - t0;
              text += piece;
            }
            if (ev.usage) usage = ev.usage;
          }
        });
        res.on('end', () => resolve({ ttft: first ?? now() - t0, ms: now() - t0, text, usage }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const WORDS =
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part river stone cloud green blue red house tree open close start stop good new old great little'.split(
    ' ',
  );
/** A user message of about 170 tokens, different for each (conversation, turn). */
function userTurn(c, t) {
  const out = [];
  let x = (c + 1) * 7919 + (t + 1) * 104729;
  for (let i = 0; i < 120; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]);
  }
  return out.join(' ');
}

const body = (messages, maxTokens = ANSWER_TOKENS) => ({
  model: 'bench',
  messages,
  max_tokens: maxTokens,
  temperature: 0,
});

/**
 * The order of the servers at step `k`: it flips at every step, so that neither always runs right
 * after the other (the first request after the other server ran is slower).
 */
const turnOrder = (n, k) => (k % 2 === 0 ? [...Array(n).keys()] : [...Array(n).keys()].reverse());

/**
 * Plays `convs` conversations round-robin on every server of `ports` at once: each turn goes to
 * each server in turn (each server has its own copy of the conversations, with its own answers),
 * so that a machine that speeds up or slows down during the run moves all of them alike. Per
 * server: the TTFT of the last two turns of each conversation, and their prompts.
 */
async function conversations(ports, convs, firstMessage) {
  const runs = ports.map(() => ({
    history: Array.from({ length: convs }, (_, c) => [{ role: 'system', content: firstMessage(c) }]),
    warm: [],
    finals: [],
    cached: [],
    promptTokens: 0,
  }));
  for (let t = 0; t < TURNS; t++) {
    for (let c = 0; c < convs; c++) {
      // convs + 1 steps a turn: each conversation, too, has the other server first at its next turn.
      for (const i of turnOrder(ports.length, t * (convs + 1) + c)) {
        const run = runs[i];
        const history = run.history[c];
        history.push({ role: 'user', content: userTurn(c, t) });
        const r = await stream(ports[i], body(history));
        if (t >= TURNS - 2) {
          run.warm.push(r.ttft);
          run.finals.push(history.slice());
          if (r.usage?.prompt_tokens_details)
            run.cached.push(r.usage.prompt_tokens_details.cached_tokens / r.usage.prompt_tokens);
        }
        if (r.usage) run.promptTokens = Math.max(run.promptTokens, r.usage.prompt_tokens);
        history.push({ role: 'assistant', content: r.text });
      }
    }
  }
  return runs;
}

/**
 * The same final prompts with a different first message (nothing of them is cached), each on its
 * own server, the servers taking turns as above. Per server, the TTFTs.
 */
async function coldRuns(ports, finals) {
  const out = ports.map(() => []);
  for (let k = 0; k < finals[0].length; k++) {
    for (const i of turnOrder(ports.length, k)) {
      const f = finals[i][k];
      const m = [{ role: 'system', content: `Cold run ${k + 1}: ${userTurn(901 + k, 0).slice(0, 60)}` }, ...f.slice(1)];
      out[i].push((await stream(ports[i], body(m))).ttft);
    }
  }
  return out;
}

/** Generation tokens/s of one completion, after its first token. */
async function generationTps(port) {
  const r = await stream(port, body([{ role: 'user', content: 'Tell me about the river and the stone.' }], GEN_TOKENS));
  const tokens = r.usage?.completion_tokens ?? GEN_TOKENS;
  return ((tokens - 1) / (r.ms - r.ttft)) * 1000;
}

/**
 * Generation on both servers at once, up side by side, in blocks: GEN_BLOCK completions on one
 * after an unmeasured one, then the same on the other, the first of the two alternating, so that a
 * machine that slows down or speeds up moves both. Blocks rather than single completions in turn:
 * the first completion after the other server ran is slower (measured on vigil after
 * llama-server: 140 and 147 tokens/s, then 158-173). Medians of all measured completions; the
 * ratio is theirs.
 */
async function generationBlocks(model, anchor) {
  const v = await startServer('vigil', model);
  const l = anchor ? await startServer('llama-server', model) : null;
  const vigil = [];
  const llama = [];
  const servers = l
    ? [
        [v, vigil],
        [l, llama],
      ]
    : [[v, vigil]];
  try {
    for (let i = 0; i < GEN_BLOCKS; i++) {
      for (const j of turnOrder(servers.length, i)) {
        const [s, into] = servers[j];
        await generationTps(s.port);
        for (let k = 0; k < GEN_BLOCK; k++) into.push(await generationTps(s.port));
      }
    }
    return {
      vigil: median(vigil),
      llama: l ? median(llama) : null,
      ratio: l ? median(vigil) / median(llama) : null,
      runs: { vigil, llama },
    };
  } finally {
    v.child.kill('SIGKILL');
    l?.child.kill('SIGKILL');
  }
}

async function waitReady(port, child, name) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode})`);
    const ok = await inferenceClient({ address: { host: '127.0.0.1', port } }, { timeoutMs: 5000 })
      .health()
      .then((h) => h.status === 200)
      .catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${name} not ready after 120 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function startServer(kind, model, extra = []) {
  const port = await freePort();
  const argv =
    kind === 'vigil'
      ? [CLI, 'serve', '--model', model, '--model-id', 'bench', '--http', `127.0.0.1:${port}`, '--parallel', '2']
          .concat([
            '--threads',
            String(THREADS),
            '--batch-threads',
            String(BATCH_THREADS),
            '--context-size',
            String(CONTEXT),
          ])
          .concat(extra)
      : ['-m', model, '--host', '127.0.0.1', '--port', String(port), '--parallel', '2', '-c', String(2 * CONTEXT)]
          .concat(['-t', String(THREADS), '-tb', String(BATCH_THREADS), '--alias', 'bench', '--log-disable'])
          .concat(extra);
  // The server's output goes to a file of the run, shown when the run fails.
  const logFile = join(tmp, `${kind}-${port}.log`);
  const out = openSync(logFile, 'a');
  const child = spawn(kind === 'vigil' ? process.execPath : LLAMA_SERVER, argv, { stdio: ['ignore', out, out] });
  closeSync(out);
  child.logFile = logFile;
  children.push(child);
  await waitReady(port, child, kind);
  if (kind === 'vigil') vigilBuild ??= llamaBuildOf(logFile);
  return { port, child };
}

/** node-llama-cpp's native binary the server runs (`prebuilt`, `localBuild`), from its `model loaded` line. */
let vigilBuild = null;
function llamaBuildOf(logFile) {
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.includes('"msg":"model loaded"')) continue;
    try {
      return JSON.parse(line).llamaBuild ?? null;
    } catch {
      return null;
    }
  }
  return null;
}

/**
 * One scenario on `kinds` (vigil, and llama-server when the anchor runs), all up side by side and
 * taking turns (`extra`: vigil's extra flags). One row per server.
 */
async function scenario(kinds, model, convs, extra = []) {
  const servers = [];
  try {
    for (const kind of kinds) servers.push(await startServer(kind, model, kind === 'vigil' ? extra : []));
    const first = (c) => `You are agent ${c + 1}. ${userTurn(500 + c, 0).slice(0, 80)}`;
    const ports = servers.map((s) => s.port);
    const runs = await conversations(ports, convs, first);
    const cold = await coldRuns(
      ports,
      runs.map((r) => r.finals),
    );
    return runs.map((run, i) => {
      const w = median(run.warm);
      const k = median(cold[i]);
      return {
        kind: kinds[i],
        convs,
        extra: kinds[i] === 'vigil' ? extra.join(' ') : '',
        warmMs: w,
        coldMs: k,
        ratio: k / w,
        promptTokens: run.promptTokens,
        cachedShare: run.cached.length > 0 ? median(run.cached) : null,
      };
    });
  } finally {
    for (const s of servers) s.child.kill('SIGKILL');
  }
}

/**
 * The run's one table: per measure and number of conversations, vigil, llama-server (when the
 * anchor ran), their ratio, the goal and whether it is met.
 */
function table(rows, anchor, gen) {
  const find = (kind, convs, extra = '') => rows.find((r) => r.kind === kind && r.convs === convs && r.extra === extra);
  const ms = (x) => `${x.toFixed(0)} ms`;
  const times = (x) => `${x.toFixed(2)}x`;
  const out = [
    '| measure | conversations | vigil | llama-server | vigil / llama-server | goal | |',
    '|---|---|---|---|---|---|---|',
  ];
  const verdict = (ok) => (ok ? 'met' : 'MISSED');
  const line = (measure, convs, v, l, fmt, ratioGoal, better) => {
    if (!v) return;
    const ratio = l ? v / l : null;
    const goal = ratioGoal && ratio !== null ? `${better === 'lower' ? '<=' : '>='} ${ratioGoal.toFixed(2)}x` : '';
    const met = goal === '' ? '' : verdict(better === 'lower' ? ratio <= ratioGoal : ratio >= ratioGoal);
    out.push(
      `| ${measure} | ${convs} | ${fmt(v)} | ${l ? fmt(l) : '-'} | ${ratio === null ? '-' : times(ratio)} | ${goal} | ${met} |`,
    );
  };
  for (const convs of [2, 4]) {
    const v = find('vigil', convs);
    const l = anchor ? find('llama-server', convs) : undefined;
    if (!v) continue;
    line('warm TTFT (median)', convs, v.warmMs, l?.warmMs, ms, 1.0, 'lower');
    line('cold TTFT (median; prompt evaluation)', convs, v.coldMs, l?.coldMs, ms, 1.1, 'lower');
    const g = convs === 2 ? 5 : 3;
    out.push(
      `| cold / warm (prefix reuse) | ${convs} | ${times(v.ratio)} | ${l ? times(l.ratio) : '-'} | | >= ${g}x (vigil) | ${verdict(v.ratio >= g)} |`,
    );
    const share = (r) => (r?.cachedShare == null ? '-' : `${(r.cachedShare * 100).toFixed(0)}%`);
    out.push(
      `| cached share of warm prompts (${v.promptTokens} tokens at the end) | ${convs} | ${share(v)} | ${share(l)} | | | |`,
    );
  }
  const tps = (x) => (x === null ? '-' : x.toFixed(1));
  out.push(
    `| generation tokens/s (one completion; median of ${GEN_BLOCKS * GEN_BLOCK}, in blocks) | - | ${tps(gen.vigil)} | ${tps(gen.llama)} | ` +
      (gen.ratio === null ? '- | | |' : `${gen.ratio.toFixed(2)}x | >= 0.95x | ${verdict(gen.ratio >= 0.95)} |`),
  );
  const off = find('vigil', 4, '--state-cache-mib 0');
  if (off) {
    out.push(
      `| cold / warm, --state-cache-mib 0 | 4 | ${times(off.ratio)} | | | (what the saved-state cache adds) | |`,
    );
  }
  return out.join('\n');
}

async function main() {
  tmp = mkdtempSync(join(tmpdir(), 'vigil-prefix-bench-'));
  const model = join(tmp, 'small.gguf');
  await makeModel({ out: model, preset: 'small', type: TYPE });
  log(
    `small model (${TYPE}) written; ${TURNS} turns, threads ${THREADS}, batch threads ${BATCH_THREADS}, --parallel 2`,
  );
  const anchor = LLAMA_SERVER !== '' && existsSync(LLAMA_SERVER);
  if (!anchor) log('LLAMA_SERVER is not set (or not a file): no llama-server anchor in this run');
  const loadStart = loadavg();
  const rows = [];
  const both = anchor ? ['vigil', 'llama-server'] : ['vigil'];
  const plan = [
    [both, 2, []],
    [both, 4, []],
    [['vigil'], 4, ['--state-cache-mib', '0']],
  ];
  for (const [kinds, convs, extra] of plan) {
    log(`${kinds.join(' and ')}, ${convs} conversations ${extra.join(' ')}`);
    rows.push(...(await scenario(kinds, model, convs, extra)));
  }
  log(`generation, ${anchor ? 'vigil and llama-server in alternating blocks' : 'vigil'}`);
  const gen = await generationBlocks(model, anchor);
  const loadEnd = loadavg();
  console.log(
    table(rows, anchor, gen) +
      `\n\n${TURNS} turns, --threads ${THREADS} --batch-threads ${BATCH_THREADS} (llama-server -t ${THREADS} -tb ${BATCH_THREADS}), --parallel 2, small model (${TYPE}); ` +
      `node-llama-cpp binary ${vigilBuild ?? 'unknown'}; ` +
      `load average ${loadStart.map((x) => x.toFixed(1)).join(' ')} at the start, ${loadEnd.map((x) => x.toFixed(1)).join(' ')} at the end, on ${cpus().length} CPUs` +
      (TYPE !== 'q8_0' && vigilBuild === 'prebuilt'
        ? `\n\nNote: ${TYPE} weights on node-llama-cpp's prebuilt binary. Its float matrix kernel spends about 2x ` +
          'llama-server\'s CPU per prompt token (inference README, "Why the binary\'s figures fall short"), so the TTFT ' +
          'ratios above measure that binary; --type q8_0 measures the server itself.'
        : ''),
  );
  if (JSON_OUT)
    console.log(
      JSON.stringify(
        {
          turns: TURNS,
          threads: THREADS,
          batchThreads: BATCH_THREADS,
          type: TYPE,
          llamaBuild: vigilBuild,
          loadStart,
          loadEnd,
          rows,
          generation: gen,
        },
        null,
        2,
      ),
    );
}

main().then(
  () => {
    cleanup();
    process.exit(0);
  },
  (err) => {
    log(`failed: ${err.stack ?? err}`);
    for (const c of children) {
      if (!c.logFile || !existsSync(c.logFile)) continue;
      const lines = readFileSync(c.logFile, 'utf8').trimEnd().split('\n').slice(-15);
      log(`${c.logFile} (exit ${c.exitCode ?? c.signalCode ?? 'running'}), last lines:\n${lines.join('\n')}`);
    }
    cleanup();
    process.exit(1);
  },
);

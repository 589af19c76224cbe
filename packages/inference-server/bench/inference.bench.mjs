#!/usr/bin/env node
// Benchmark of the inference server against node-llama-cpp called in-process ("the limit"),
// in one run so the ratios mean something. Run `pnpm build` first, then:
//
//   node packages/inference-server/bench/inference.bench.mjs [--preset small|tiny|1b] [--type f16|q8_0|f32] [--quick] [--json]
//
// It writes the model (default: the `small` preset, ~100 M parameters, f16) into a temporary
// directory, loads it in this process with node-llama-cpp (same threads, context size and chat
// wrapper as the server), and starts the server as a child process through its CLI. Then, the
// same prompt and settings (temperature 0, a fixed number of tokens: the generated models never
// stop early), alternating baseline and server, medians of ROUNDS rounds:
//
//   1. tokens/s of one completion: HTTP (non-streaming) vs in-process;         goal ratio >= 0.95
//   2. time to first token: streaming over HTTP vs in-process; the difference is what the server adds;
//   3. 4 parallel clients' aggregate tokens/s vs one client, both over HTTP;  goal ratio >= 1.3
//   4. GET /v1/models latency p50/p99 while 4 completions generate;          goal p99 < 2 ms
//
// It prints one table (measure | server | baseline | ratio | goal | met) and with --json a JSON
// summary. Goals missed are reported, not hidden; the exit code is 0 when the run completed and
// 1 when it could not run. Traffic goes only to 127.0.0.1; the child process and the temporary
// directory are removed at the end, also on error; a watchdog bounds the whole run.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { guardRun } from './run-guard.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const BARE = join(HERE, 'bare-models-server.mjs');
let ACCESS_LOG = '';
const { makeModel, defaultThreads, parameterCount, PRESETS } = await import('../dist/index.js');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : def;
};
const QUICK = args.includes('--quick');
const JSON_OUT = args.includes('--json');
const PRESET = flag('--preset', 'small');
const TYPE = flag('--type', 'f16');
const ROUNDS = QUICK ? 1 : 3;
const TOKENS = PRESET === 'tiny' ? 512 : QUICK ? 48 : 128;
const PARALLEL = 4;
const CONTEXT = 2048;
const MODELS_SAMPLES = QUICK ? 300 : 2000;
const RUN_TIMEOUT_MS = 590_000;
const THREADS_GIVEN = args.includes('--threads');
/** --server-arg X (repeatable): more flags for `inference-server serve`. */
const SERVER_ARGS = args.flatMap((a, i) => (a === '--server-arg' && args[i + 1] ? [args[i + 1]] : []));
// The server's default (adaptive: these threads for one completion, all physical cores for a
// batch); the baseline gets the same count for its one completion.
const THREADS = Number(flag('--threads', String(defaultThreads())));
const PROMPT = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Tell me about the river, the stone and the green house.' },
];

const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

// ---- cleanup ------------------------------------------------------------------------------

let tmp = null;
let child = null;
const children = [];
let cleaned = false;
function cleanup() {
  if (cleaned) return;
  cleaned = true;
  for (const c of [child, ...children]) if (c && c.exitCode === null) c.kill('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}
guardRun(cleanup, RUN_TIMEOUT_MS, log);

// ---- HTTP ---------------------------------------------------------------------------------

const agent = new Agent({ keepAlive: true, maxSockets: 64 });
let PORT = 0;

function post(body, onData) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port: PORT,
        method: 'POST',
        path: '/v1/chat/completions',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => {
          chunks.push(c);
          onData?.(c);
        });
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

function get(path, port = PORT) {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    });
    req.on('error', reject);
    req.end();
  });
}

const completionBody = (maxTokens, stream = false, messages = PROMPT) => ({
  model: 'bench',
  messages,
  max_tokens: maxTokens,
  temperature: 0,
  ...(stream ? { stream: true } : {}),
});

/** Structured output: a schema whose answers run to max_tokens (a long array of short strings). */
const JSON_SCHEMA_FORMAT = {
  response_format: {
    type: 'json_schema',
    json_schema: {
      name: 'bench',
      strict: true,
      schema: {
        type: 'object',
        properties: { items: { type: 'array', items: { type: 'string', maxLength: 24 }, minItems: 256 } },
        required: ['items'],
        additionalProperties: false,
      },
    },
  },
};

/** One completion over HTTP: tokens/s of the whole request. */
async function serverCompletion(extra = {}) {
  const t0 = now();
  const r = await post({ ...completionBody(TOKENS), ...extra });
  const ms = now() - t0;
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${r.text}`);
  const tokens = JSON.parse(r.text).usage.completion_tokens;
  return { tokens, ms, tps: (tokens / ms) * 1000 };
}

/** A prompt no sequence has cached: time to first token includes evaluating all of it. */
let fresh = 0;
const freshPrompt = () => [PROMPT[0], { role: 'user', content: `${PROMPT[1].content} (${++fresh})` }];

/** Time to the first content chunk of a stream. */
async function serverTtft() {
  const t0 = now();
  let first = null;
  let buf = '';
  await post(completionBody(8, true, freshPrompt()), (c) => {
    if (first !== null) return;
    buf += c.toString('utf8');
    // the first event is the role; the first content delta comes after it
    if (/"delta":\{"content":"/.test(buf)) first = now() - t0;
  });
  return first;
}

// ---- the baseline: node-llama-cpp in this process ----------------------------------------

async function loadBaseline(modelPath) {
  const lib = await import('node-llama-cpp');
  const llama = await lib.getLlama({
    gpu: false,
    maxThreads: THREADS,
    build: 'never',
    skipDownload: true,
    logLevel: lib.LlamaLogLevel.error,
  });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ sequences: 1, contextSize: CONTEXT, threads: THREADS });
  const chatWrapper = lib.resolveChatWrapper(model);
  const sequence = context.getSequence();
  const history = (messages) => [
    { type: 'system', text: messages[0].content },
    { type: 'user', text: messages[1].content },
    { type: 'model', response: [] },
  ];
  const generate = async (maxTokens, messages = PROMPT) => {
    const chat = new lib.LlamaChat({ contextSequence: sequence, chatWrapper });
    let tokens = 0;
    let first = null;
    const t0 = now();
    await chat.generateResponse(history(messages), {
      maxTokens,
      temperature: 0,
      repeatPenalty: false,
      onToken: (t) => {
        tokens += t.length;
      },
      onTextChunk: () => {
        if (first === null) first = now() - t0;
      },
    });
    const ms = now() - t0;
    chat.dispose({ disposeSequence: false });
    return { tokens, ms, tps: (tokens / ms) * 1000, ttft: first };
  };
  return { generate, dispose: () => llama.dispose() };
}

// ---- run ----------------------------------------------------------------------------------

async function startServer(modelPath) {
  child = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--model',
      modelPath,
      '--model-id',
      'bench',
      '--http',
      '127.0.0.1:0',
      '--parallel',
      String(PARALLEL),
      '--context-size',
      String(CONTEXT),
      ...(THREADS_GIVEN ? ['--threads', String(THREADS)] : []),
      ...SERVER_ARGS,
      '--gpu',
      'off',
      '--log-level',
      'info',
      '--access-log',
      ACCESS_LOG,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8');
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the server did not start')), 60_000);
    child.stdout.on('data', (s) => {
      out += s;
    });
    child.on('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
    const poll = async () => {
      while (!PORT) {
        const line = out.split('\n').find((l) => l.includes('"msg":"listening"'));
        if (line) PORT = Number(JSON.parse(line).http.split(':').pop());
        else await new Promise((r) => setTimeout(r, 20));
      }
      for (;;) {
        const status = await get('/health').catch(() => 0);
        if (status === 200) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      clearTimeout(t);
      resolve();
    };
    poll().catch(reject);
  });
}

async function main() {
  tmp = mkdtempSync(join(tmpdir(), 'vigil-inference-bench-'));
  ACCESS_LOG = join(tmp, 'access.log');
  const modelPath = join(tmp, `${PRESET}-${TYPE}.gguf`);
  let t0 = now();
  const made = await makeModel({ out: modelPath, preset: PRESET, type: TYPE, seed: 1 });
  log(
    `wrote ${PRESET} (${(parameterCount(PRESETS[PRESET]) / 1e6).toFixed(0)} M parameters, ${TYPE}, ${(made.bytes / 1048576).toFixed(0)} MiB) in ${((now() - t0) / 1000).toFixed(1)} s; threads ${THREADS}`,
  );
  t0 = now();
  const baseline = await loadBaseline(modelPath);
  await startServer(modelPath);
  log(`baseline and server loaded in ${((now() - t0) / 1000).toFixed(1)} s; server on 127.0.0.1:${PORT}`);

  // warm-up
  await baseline.generate(8);
  await serverCompletion().catch((e) => {
    throw e;
  });
  await serverTtft();
  await serverCompletion(JSON_SCHEMA_FORMAT);
  await Promise.all(Array.from({ length: PARALLEL }, () => post(completionBody(16))));

  const single = { server: [], baseline: [] };
  const grammar = [];
  const ttft = { server: [], baseline: [] };
  const par = { one: [], four: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const b = await baseline.generate(TOKENS);
    single.baseline.push(b.tps);
    const s = await serverCompletion();
    single.server.push(s.tps);
    grammar.push((await serverCompletion(JSON_SCHEMA_FORMAT)).tps);
    ttft.baseline.push((await baseline.generate(8, freshPrompt())).ttft);
    ttft.server.push(await serverTtft());
    // one client vs 4 at once, over HTTP
    par.one.push(s.tps);
    const t = now();
    const all = await Promise.all(Array.from({ length: PARALLEL }, () => post(completionBody(TOKENS))));
    const ms = now() - t;
    const tokens = all.reduce((n, r) => n + JSON.parse(r.text).usage.completion_tokens, 0);
    par.four.push((tokens / ms) * 1000);
    log(
      `round ${round + 1}/${ROUNDS}: in-process ${b.tps.toFixed(1)} tok/s, HTTP ${s.tps.toFixed(1)} tok/s, JSON schema ${grammar[round].toFixed(1)} tok/s, 4 clients ${((tokens / ms) * 1000).toFixed(1)} tok/s`,
    );
  }

  // /v1/models while PARALLEL completions generate, alternating with a bare Node server that
  // answers the same list (a child process: the same machine, the same load, nothing else).
  const bare = spawn(process.execPath, [BARE], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(bare);
  const barePort = await new Promise((resolve, reject) => {
    bare.stdout.setEncoding('utf8');
    bare.stdout.once('data', (s) => resolve(Number(s.trim())));
    bare.once('exit', (code) => reject(new Error(`the bare server exited with ${code}`)));
  });
  const latencies = [];
  const bareLatencies = [];
  let generating = true;
  const loadStarted = Date.now() / 1000;
  const load = Promise.all(
    Array.from({ length: PARALLEL }, () => post(completionBody(Math.min(CONTEXT - 200, TOKENS * 8)))),
  ).finally(() => {
    generating = false;
  });
  await new Promise((r) => setTimeout(r, 300));
  while (generating && latencies.length < MODELS_SAMPLES) {
    let t = now();
    if ((await get('/v1/models')) !== 200) throw new Error('/v1/models failed');
    latencies.push(now() - t);
    await new Promise((r) => setImmediate(r));
    t = now();
    if ((await get('/v1/models', barePort)) !== 200) throw new Error('the bare server failed');
    bareLatencies.push(now() - t);
    await new Promise((r) => setImmediate(r));
  }
  const loadEnded = Date.now() / 1000;
  const sampledWhileGenerating = latencies.length;
  await load;
  await baseline.dispose();
  // Server-side time of those requests, from the access log (request parsed -> reply written).
  await new Promise((r) => setTimeout(r, 300));
  const handled = readFileSync(ACCESS_LOG, 'utf8')
    .split('\n')
    .filter((l) => l.includes('"path":"/v1/models"'))
    .map((l) => JSON.parse(l))
    .filter((r) => r.ts >= loadStarted && r.ts <= loadEnded)
    .map((r) => r.duration_ms);

  const m = {
    singleServer: median(single.server),
    singleBaseline: median(single.baseline),
    jsonSchema: median(grammar),
    ttftServer: median(ttft.server),
    ttftBaseline: median(ttft.baseline),
    one: median(par.one),
    four: median(par.four),
    modelsP50: pct(latencies, 50),
    modelsP99: pct(latencies, 99),
    bareP50: pct(bareLatencies, 50),
    bareP99: pct(bareLatencies, 99),
    handledP99: pct(handled, 99),
    handledSamples: handled.length,
    modelsSamples: sampledWhileGenerating,
  };
  const rows = [
    [
      'tokens/s, one completion (HTTP vs in-process)',
      m.singleServer.toFixed(1),
      m.singleBaseline.toFixed(1),
      (m.singleServer / m.singleBaseline).toFixed(3),
      '>= 0.95',
      m.singleServer / m.singleBaseline >= 0.95,
    ],
    [
      'tokens/s, JSON-schema grammar vs free text (HTTP)',
      m.jsonSchema.toFixed(1),
      m.singleServer.toFixed(1),
      (m.jsonSchema / m.singleServer).toFixed(3),
      'report',
      null,
    ],
    [
      'time to first token, ms (HTTP stream vs in-process)',
      m.ttftServer.toFixed(1),
      m.ttftBaseline.toFixed(1),
      `${m.ttftServer >= m.ttftBaseline ? '+' : ''}${(m.ttftServer - m.ttftBaseline).toFixed(1)} ms`,
      'report',
      null,
    ],
    [
      `aggregate tokens/s, ${PARALLEL} clients vs 1 (HTTP)`,
      m.four.toFixed(1),
      m.one.toFixed(1),
      (m.four / m.one).toFixed(3),
      '>= 1.3',
      m.four / m.one >= 1.3,
    ],
    [
      `GET /v1/models p50 / p99 ms, client, under load (vs bare Node server, ${m.modelsSamples} samples)`,
      `${m.modelsP50.toFixed(3)} / ${m.modelsP99.toFixed(3)}`,
      `${m.bareP50.toFixed(3)} / ${m.bareP99.toFixed(3)}`,
      (m.modelsP99 / m.bareP99).toFixed(3),
      'p99 < 2 ms',
      m.modelsP99 < 2,
    ],
    [
      `GET /v1/models p99 ms, in the server (access log, ${m.handledSamples} samples)`,
      m.handledP99.toFixed(3),
      '-',
      '-',
      'p99 < 2 ms',
      m.handledP99 < 2,
    ],
  ];
  const head = ['measure', 'server', 'baseline', 'ratio', 'goal', 'met'];
  const cells = [head, ...rows.map((r) => [r[0], r[1], r[2], r[3], r[4], r[5] === null ? '-' : r[5] ? 'yes' : 'no'])];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((c, i) => String(c).padEnd(widths[i])).join(' | ')} |`;
  console.log(
    `\ninference-server, preset ${PRESET} (${TYPE}), ${TOKENS} tokens per completion, temperature 0, threads ${THREADS}, parallel ${PARALLEL}, ${ROUNDS} rounds (medians)\n`,
  );
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of cells.slice(1)) console.log(line(r));
  if (JSON_OUT) console.log(JSON.stringify({ preset: PRESET, type: TYPE, threads: THREADS, tokens: TOKENS, ...m }));
}

try {
  await main();
  agent.destroy();
  cleanup();
  process.exit(0);
} catch (err) {
  log(`failed: ${err?.stack ?? err}`);
  cleanup();
  process.exit(1);
}

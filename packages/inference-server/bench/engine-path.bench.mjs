#!/usr/bin/env node
// Where prompt evaluation and generation spend their time, below the HTTP server: the same
// prompt and the same greedy generation through node-llama-cpp's raw sequence API
// (evaluateWithoutGeneratingNewTokens / evaluate), through LlamaChat (what the server's chat
// completions with tools or a grammar run: chat template, stop triggers, text chunks), through the
// server's plain path (engine-plain.ts: chat completions with neither; its steps through
// node-llama-cpp's batch queue, and direct as when alone on the model, engine-step.ts) and through LlamaCompletion
// (legacy completions), and, when LLAMA_SERVER gives its path, through llama-server's /completion on the
// same GGUF and threads. Run `pnpm build` first, then `pnpm bench engine-path`, or:
//
//   node packages/inference-server/bench/engine-path.bench.mjs [--threads N] [--words N]
//        [--tokens N] [--rounds N] [--type f16|q8_0|f32] [--json]
//
// Besides wall time it reports CPU time per token (the process's, every thread counted:
// process.cpuUsage here, /proc/PID/stat for llama-server). On a shared machine wall time follows
// the load; CPU time per token much less, so it tells apart work done from time waited. With
// --threads 1 (the default) CPU time is the work itself; with more, it includes the threads'
// waiting at their barriers. Medians of --rounds (default 3) rounds, the paths interleaved.
//
// The small model (~100 M parameters; weights f16 unless --type says otherwise) is written into
// a temporary directory, removed at the end. Traffic goes only to 127.0.0.1. Exit 0 when the run
// completed, 2 on a bad --type.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@vigil/shared-types/node';

const { makeModel } = await import('../dist/index.js');
const { completePlain, plainStops } = await import('../dist/engine-plain.js');
const { getLlama, LlamaChat, LlamaCompletion, resolveChatWrapper } = await import('node-llama-cpp');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? Number(args[i + 1]) : def;
};
const THREADS = flag('--threads', 1);
const WORDS_N = flag('--words', 400);
const GEN = flag('--tokens', 64);
const ROUNDS = flag('--rounds', 3);
const ti = args.indexOf('--type');
const TYPE = ti >= 0 && args[ti + 1] ? args[ti + 1] : 'f16';
if (!['f16', 'q8_0', 'f32'].includes(TYPE)) {
  process.stderr.write(`bench: --type takes f16, q8_0 or f32, not ${TYPE}\n`);
  process.exit(2);
}
const LLAMA_SERVER = process.env.LLAMA_SERVER ?? '';
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const tmp = mkdtempSync(join(tmpdir(), 'vigil-engine-path-'));
let server = null;
const cleanup = () => {
  if (server && server.exitCode === null) server.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
};
process.on('exit', cleanup);

const WORDS =
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part river stone cloud green blue red house tree open close start stop good new old great little'.split(
    ' ',
  );
let seed = 12345;
function words(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) >>> 0;
    out.push(WORDS[seed % WORDS.length]);
  }
  return out.join(' ');
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = new Map();
function record(path, key, value) {
  if (!results.has(path)) results.set(path, {});
  const r = results.get(path);
  r[key] ??= [];
  r[key].push(value);
}

/** Times `fn` (which returns the tokens it evaluated or generated): wall and CPU ms per token. */
async function measure(path, what, fn, cpu = cpuMs) {
  const c0 = cpu();
  const t0 = performance.now();
  const tokens = await fn();
  record(path, `${what} wall`, (performance.now() - t0) / tokens);
  record(path, `${what} cpu`, (cpu() - c0) / tokens);
}

async function inProcess(model, sequence, wrapper, text) {
  const history = [
    { type: 'user', text },
    { type: 'model', response: [] },
  ];
  const tokens = wrapper.generateContextState({ chatHistory: history }).contextText.tokenize(model.tokenizer);
  await sequence.clearHistory();
  await measure('raw sequence API', 'prompt', async () => {
    await sequence.evaluateWithoutGeneratingNewTokens(tokens);
    return tokens.length;
  });
  await sequence.clearHistory();
  const chat = new LlamaChat({ contextSequence: sequence });
  await measure('LlamaChat', 'prompt', async () => {
    await chat.generateResponse(history, { maxTokens: 1, temperature: 0 });
    return tokens.length;
  });
  chat.dispose({ disposeSequence: false });
  await sequence.clearHistory();
  const completion = new LlamaCompletion({ contextSequence: sequence });
  await measure('LlamaCompletion', 'prompt', async () => {
    await completion.generateCompletion(text, { maxTokens: 1, temperature: 0 });
    return model.tokenize(text, false).length;
  });

  const short = [
    { type: 'user', text: 'Tell me about the river and the stone.' },
    { type: 'model', response: [] },
  ];
  const st = wrapper.generateContextState({ chatHistory: short }).contextText.tokenize(model.tokenizer);
  // Generation from its first token on (the prompt before it is not counted).
  const plain = (stepping) => async (onToken) => {
    let seen = 0;
    const input = {
      messages: [],
      maxTokens: GEN,
      temperature: 0,
      topP: 1,
      seed: null,
      stop: [],
      frequencyPenalty: 0,
      presencePenalty: 0,
      signal: new AbortController().signal,
      onText: () => {},
      onTokens: (count) => {
        onToken(new Array(count - seen));
        seen = count;
      },
    };
    await completePlain(sequence, st, GEN, plainStops(wrapper, model) ?? [], input, stepping);
  };
  const paths = [
    [
      'raw sequence API',
      async (onToken) => {
        await sequence.evaluateWithoutGeneratingNewTokens(st.slice(0, -1));
        let n = 0;
        for await (const _ of sequence.evaluate(st.slice(-1), { temperature: 0 })) {
          onToken([_]);
          if (++n >= GEN) break;
        }
      },
    ],
    [
      'LlamaChat',
      async (onToken) => {
        const c = new LlamaChat({ contextSequence: sequence });
        await c.generateResponse(short, { maxTokens: GEN, temperature: 0, onToken });
        c.dispose({ disposeSequence: false });
      },
    ],
    // What the server runs for a chat completion with no tools and no grammar: with every step
    // through node-llama-cpp's batch queue, and alone on the model (direct steps, engine-step.ts).
    ['plain path (engine-plain)', plain(null)],
    ['plain path, direct steps', plain({ alone: () => true, threads: THREADS })],
    [
      'LlamaCompletion',
      (onToken) =>
        completion.generateCompletion('Tell me about the river and the stone.', {
          maxTokens: GEN,
          temperature: 0,
          onToken,
        }),
    ],
  ];
  for (const [path, run] of paths) {
    await sequence.clearHistory();
    let n = 0;
    let c0 = 0;
    let t0 = 0;
    await run((t) => {
      if (n === 0) {
        c0 = cpuMs();
        t0 = performance.now();
      }
      n += t.length;
    });
    record(path, 'generation wall', (performance.now() - t0) / Math.max(1, n - 1));
    record(path, 'generation cpu', (cpuMs() - c0) / Math.max(1, n - 1));
  }
  completion.dispose({ disposeSequence: false });
}

async function startAnchor(modelPath) {
  const port = await freePort();
  const argv = ['-m', modelPath, '--host', '127.0.0.1', '--port', String(port), '--parallel', '2', '-c', '8192'].concat(
    ['-t', String(THREADS), '-tb', String(THREADS), '--log-disable'],
  );
  server = spawn(LLAMA_SERVER, argv, { stdio: 'ignore' });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return port;
    if (server.exitCode !== null || Date.now() > deadline) throw new Error('llama-server did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** llama-server's CPU time so far, ms (utime + stime of /proc/PID/stat, 100 Hz ticks). */
function anchorCpuMs() {
  const fields = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function anchor(port, text) {
  const post = (body) =>
    fetch(`http://127.0.0.1:${port}/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ cache_prompt: false, temperature: 0, ...body }),
    }).then((r) => r.json());
  await measure(
    'llama-server',
    'prompt',
    async () => (await post({ prompt: text, n_predict: 1 })).timings.prompt_n,
    anchorCpuMs,
  );
  await measure(
    'llama-server',
    'generation',
    async () =>
      (await post({ prompt: 'Tell me about the river and the stone.', n_predict: GEN, ignore_eos: true })).timings
        .predicted_n,
    anchorCpuMs,
  );
}

async function main() {
  const modelPath = join(tmp, 'small.gguf');
  await makeModel({ out: modelPath, preset: 'small', type: TYPE });
  const loadStart = loadavg();
  const llama = await getLlama({
    gpu: false,
    maxThreads: THREADS,
    build: 'never',
    skipDownload: true,
    progressLogs: false,
  });
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({ sequences: 2, contextSize: 4096, threads: THREADS });
  const sequence = context.getSequence();
  const wrapper = resolveChatWrapper(model);
  const withAnchor = LLAMA_SERVER !== '' && existsSync(LLAMA_SERVER);
  if (!withAnchor) log('LLAMA_SERVER is not set (or not a file): no llama-server row in this run');
  const port = withAnchor ? await startAnchor(modelPath) : 0;
  for (let round = 0; round < ROUNDS; round++) {
    const text = words(WORDS_N);
    await inProcess(model, sequence, wrapper, text);
    if (withAnchor) await anchor(port, text);
    log(`round ${round + 1} of ${ROUNDS}`);
  }
  await context.dispose();
  await model.dispose();
  const f = (xs, digits = 2) => (xs ? median(xs).toFixed(digits) : '-');
  const lines = [
    '| path | prompt: CPU ms/token | prompt: wall ms/token | generation: CPU ms/token | generation: tokens/s (wall) |',
    '|---|---|---|---|---|',
  ];
  for (const [path, r] of results) {
    const tps = r['generation wall'] ? (1000 / median(r['generation wall'])).toFixed(1) : '-';
    lines.push(`| ${path} | ${f(r['prompt cpu'])} | ${f(r['prompt wall'])} | ${f(r['generation cpu'])} | ${tps} |`);
  }
  lines.push(
    '',
    `${llama.buildType} node-llama-cpp binary; small model (${TYPE}); threads ${THREADS}; prompt ~${WORDS_N} words, ${GEN} tokens generated; ` +
      `load average ${loadStart.map((x) => x.toFixed(1)).join(' ')} at the start, ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')} at the end, on ${cpus().length} CPUs`,
  );
  console.log(lines.join('\n'));
  if (args.includes('--json')) console.log(JSON.stringify(Object.fromEntries(results), null, 2));
  await llama.dispose();
}

main().then(
  () => {
    cleanup();
    process.exit(0);
  },
  (err) => {
    log(`failed: ${err.stack ?? err}`);
    cleanup();
    process.exit(1);
  },
);

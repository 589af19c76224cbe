#!/usr/bin/env node
// Benchmark of the protocol adapters against chat completions, in one run so the ratios mean
// something. Run `pnpm build` first, then (or through `pnpm bench inference`):
//
//   node packages/inference-server/bench/protocols.bench.mjs [--preset tiny|small|1b] [--rounds N] [--tokens N] [--server-arg X]…
//
// It writes the model (default: the `small` preset, ~100 M parameters, f16) into a temporary
// directory and starts the server on it as a child process. Then the same prompt, streamed, with
// temperature 0 and a fixed number of tokens (the generated models never stop early), through
// POST /v1/chat/completions, /v1/responses and /v1/messages, one after another in each round,
// medians of the rounds, the order rotating from round to round. One sequence (--parallel 1): every
// request runs on the same one, so that which sequence (and which cached prefix) a request gets
// does not differ between the protocols:
//
//   1. tokens/s of one streamed response, relative to chat completions;        goal ratio >= 0.95
//   2. time to first byte of the stream (status line and first event), minus chat's; goal <= 5 ms
//   3. time to the first text delta, minus chat's (reported)
//
// It prints one table; goals missed are reported, not hidden; exit code 0 when the run completed,
// 1 when it could not run. Traffic goes only to 127.0.0.1; the child process and the temporary
// directory are removed at the end, also on error; a watchdog bounds the whole run.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const { makeModel, defaultThreads } = await import('../dist/index.js');

const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : def;
};
const PRESET = flag('--preset', 'small');
const ROUNDS = Number(flag('--rounds', '5'));
const TOKENS = Number(flag('--tokens', PRESET === 'tiny' ? '256' : '64'));
const THREADS = defaultThreads();
/** --server-arg X (repeatable): more flags for `inference-server serve`. */
const SERVER_ARGS = args.flatMap((a, i) => (a === '--server-arg' && args[i + 1] ? [args[i + 1]] : []));
const SYSTEM = 'You are a helpful assistant.';
const USER = 'Tell me about the river, the stone and the green house.';
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const now = () => Number(process.hrtime.bigint()) / 1e6;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

let tmp = null;
let child = null;
const cleanup = () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  tmp = null;
};
const watchdog = setTimeout(() => {
  log('the run took too long; stopping');
  cleanup();
  process.exit(1);
}, 590_000);
watchdog.unref();

/** The three protocols: path, body, and how a text delta shows in the stream. */
const PROTOCOLS = {
  chat: {
    path: '/v1/chat/completions',
    body: {
      model: 'm',
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: USER },
      ],
      max_tokens: TOKENS,
      temperature: 0,
      stream: true,
    },
    delta: /"content":"[^"]/,
  },
  responses: {
    path: '/v1/responses',
    body: { model: 'm', instructions: SYSTEM, input: USER, max_output_tokens: TOKENS, temperature: 0, stream: true },
    delta: /response\.output_text\.delta/,
  },
  messages: {
    path: '/v1/messages',
    body: {
      model: 'm',
      system: SYSTEM,
      messages: [{ role: 'user', content: USER }],
      max_tokens: TOKENS,
      temperature: 0,
      stream: true,
    },
    delta: /text_delta/,
  },
};

let PORT = 0;
/** One streamed request: time to first byte, to the first text delta, and the whole. */
function streamOnce(p) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify(p.body);
    const t0 = now();
    let firstByte = null;
    let firstDelta = null;
    const req = request(
      {
        host: '127.0.0.1',
        port: PORT,
        method: 'POST',
        path: p.path,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`${p.path}: HTTP ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (s) => {
          firstByte ??= now() - t0;
          if (firstDelta === null && p.delta.test(s)) firstDelta = now() - t0;
        });
        res.on('end', () => resolve({ firstByte, firstDelta, total: now() - t0 }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function startServer(model) {
  child = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--model',
      model,
      '--model-id',
      'm',
      '--http',
      '127.0.0.1:0',
      '--context-size',
      '2048',
      '--parallel',
      '1',
      ...SERVER_ARGS,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (s) => {
    out += s;
  });
  child.stderr.resume();
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const line = out.split('\n').find((l) => l.includes('"msg":"model loaded"'));
    const listening = out.split('\n').find((l) => l.includes('"msg":"listening"'));
    if (listening) PORT = Number(JSON.parse(listening).http.split(':').pop());
    if (line && PORT) return;
    if (child.exitCode !== null) throw new Error(`server exited: ${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('server did not load the model in time');
}

try {
  tmp = mkdtempSync(join(tmpdir(), 'vigil-protocols-bench-'));
  const model = join(tmp, 'model.gguf');
  await makeModel({ out: model, preset: PRESET, type: 'f16', seed: 1 });
  await startServer(model);
  log(`${PRESET}, ${TOKENS} tokens, ${ROUNDS} rounds, threads ${THREADS}`);
  for (const p of Object.values(PROTOCOLS)) await streamOnce(p); // warm-up
  const runs = Object.fromEntries(Object.keys(PROTOCOLS).map((k) => [k, []]));
  // The order rotates from round to round: no protocol always follows the same one.
  const keys = Object.keys(PROTOCOLS);
  for (let r = 0; r < ROUNDS; r++) {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[(i + r) % keys.length];
      runs[k].push(await streamOnce(PROTOCOLS[k]));
    }
  }
  const m = (k, f) => median(runs[k].map(f));
  const tps = (k) => m(k, (x) => TOKENS / (x.total / 1000));
  const rows = [['measure', 'protocol', 'chat', 'ratio / diff', 'goal', 'met']];
  for (const k of ['responses', 'messages']) {
    const ratio = tps(k) / tps('chat');
    rows.push([
      `tokens/s (streamed)`,
      `${k} ${tps(k).toFixed(1)}`,
      tps('chat').toFixed(1),
      `${ratio.toFixed(3)}x`,
      '>= 0.95x',
      ratio >= 0.95 ? 'yes' : 'NO',
    ]);
    const fb = m(k, (x) => x.firstByte) - m('chat', (x) => x.firstByte);
    rows.push([
      `time to first byte`,
      `${k} ${m(k, (x) => x.firstByte).toFixed(2)} ms`,
      `${m('chat', (x) => x.firstByte).toFixed(2)} ms`,
      `${fb >= 0 ? '+' : ''}${fb.toFixed(2)} ms`,
      '<= +5 ms',
      fb <= 5 ? 'yes' : 'NO',
    ]);
    const fd = m(k, (x) => x.firstDelta) - m('chat', (x) => x.firstDelta);
    rows.push([
      `time to first text delta`,
      `${k} ${m(k, (x) => x.firstDelta).toFixed(2)} ms`,
      `${m('chat', (x) => x.firstDelta).toFixed(2)} ms`,
      `${fd >= 0 ? '+' : ''}${fd.toFixed(2)} ms`,
      '(reported)',
      '',
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  for (const r of rows) console.log(r.map((c, i) => String(c).padEnd(widths[i])).join(' | '));
  cleanup();
  process.exit(0);
} catch (err) {
  log(`could not run: ${err.message}`);
  cleanup();
  process.exit(1);
}

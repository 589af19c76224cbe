#!/usr/bin/env node
// Runs the agent programs people point at this server, end to end, against the server as a child
// process: Codex CLI (`codex exec`, a custom provider with wire_api = "responses") and Claude Code
// (`claude -p`, ANTHROPIC_BASE_URL). Not part of the test suite (it installs both from npm, and
// each is a large download): run it by hand after `pnpm build`:
//
//   node packages/inference-server/bench/agent-clis.mjs [--model FILE] [--cli-dir DIR] [--only codex|claude] [--context-size N] [--verbose]
//
// --model: a GGUF file (default: the generated tiny model written with `make-model --end-answers`,
// in a temporary directory: its turns end at once, with an empty answer, so each program's turn is
// `completed` / `end_turn`; a plain generated model never ends an answer and each turn runs until
// the context is full, which Codex reports as `incomplete` and exits 1);
// --cli-dir: a directory where `@openai/codex` and `@anthropic-ai/claude-code` are installed (default:
// `npm i` into a temporary directory); --context-size: the server's (default 32768). Give a context
// larger than the program's prompt: with the tiny model's tokenizer, Codex CLI 0.169's is about
// 27.5 k tokens and Claude Code 2.1's about 57.5 k (`--only codex --context-size 28672`,
// `--only claude --context-size 58368`; both at once: `--context-size 58368`). The server gets an
// API key and --request-timeout 600. Each program must exit 0 without an API error in its output;
// the script prints one line per program (exit code, requests it made) and the server's access-log
// lines of the run, and exits 1 when one failed (--verbose: each program's output too). Traffic
// goes only to 127.0.0.1 (the programs' own update checks and telemetry are turned off by their
// environment variables).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', 'bin', 'inference-server.js');
const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] ? args[i + 1] : def;
};
const KEY = 'sk-vigil-agent-clis';
const tmp = mkdtempSync(join(tmpdir(), 'vigil-agent-clis-'));
let server = null;
const cleanup = () => {
  if (server && server.exitCode === null) server.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
};
const log = (m) => process.stderr.write(`agent-clis: ${m}\n`);
const programs = new Set();
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const p of programs) p.kill('SIGKILL');
    cleanup();
    process.exit(1);
  });
}

/** Runs a program to its end (at most `ms`); its exit code and output. */
function runProgram(cmd, argv, env, ms = 900_000) {
  return new Promise((resolve) => {
    const c = spawn(cmd, argv, {
      env: { PATH: process.env.PATH, ...env },
      cwd: tmp,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    c.stdout.on('data', (d) => {
      out += d;
    });
    c.stderr.on('data', (d) => {
      out += d;
    });
    const t = setTimeout(() => c.kill('SIGKILL'), ms);
    c.on('close', (code) => {
      programs.delete(c);
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

try {
  let model = flag('--model', null);
  if (!model) {
    model = join(tmp, 'tiny-ends.gguf');
    const r = spawnSync(process.execPath, [CLI, 'make-model', '--out', model, '--end-answers'], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`make-model failed: ${r.stderr}`);
  }
  let cliDir = flag('--cli-dir', null);
  if (!cliDir) {
    cliDir = join(tmp, 'clis');
    mkdirSync(cliDir);
    log('installing @openai/codex and @anthropic-ai/claude-code from npm …');
    const r = spawnSync('npm', ['i', '--no-audit', '--no-fund', '@openai/codex', '@anthropic-ai/claude-code'], {
      cwd: cliDir,
      stdio: 'inherit',
    });
    if (r.status !== 0) throw new Error('npm install failed');
  }
  const bin = (name) => join(cliDir, 'node_modules', '.bin', name);
  const keyFile = join(tmp, 'api-key');
  writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
  const accessLog = join(tmp, 'access.log');
  server = spawn(
    process.execPath,
    [
      CLI,
      'serve',
      '--model',
      model,
      '--model-id',
      'local',
      '--http',
      '127.0.0.1:0',
      '--context-size',
      flag('--context-size', '32768'),
      '--request-timeout',
      '600',
      '--api-key-file',
      keyFile,
      '--access-log',
      accessLog,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  server.stdout.setEncoding('utf8');
  server.stdout.on('data', (s) => {
    out += s;
  });
  let port = 0;
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
    const l = out.split('\n').find((x) => x.includes('"msg":"listening"'));
    if (l) port = Number(JSON.parse(l).http.split(':').pop());
    if (port && out.includes('"msg":"model loaded"')) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (!port) throw new Error(`the server did not start:\n${out}`);
  const base = `http://127.0.0.1:${port}`;
  /** The access-log lines so far (the server writes one per request as it ends). */
  const accessLines = () =>
    existsSync(accessLog)
      ? readFileSync(accessLog, 'utf8')
          .split('\n')
          .filter((l) => l.trim() !== '')
          .map((l) => JSON.parse(l))
      : [];
  const describe = (x) =>
    `${x.method} ${x.path} ${x.status} ${x.msg}${x.error ? ` ${x.error}` : ''}${x.completion_tokens === undefined ? '' : ` completion_tokens=${x.completion_tokens}`}`;
  const only = flag('--only', null);
  const results = [];

  if (only === null || only === 'codex') {
    // Codex CLI: a custom provider speaking the Responses API.
    const home = join(tmp, 'codex-home');
    mkdirSync(home);
    writeFileSync(
      join(home, 'config.toml'),
      `model = "local"\nmodel_provider = "vigil"\n\n[model_providers.vigil]\nname = "vigil"\nbase_url = "${base}/v1"\nwire_api = "responses"\nenv_key = "VIGIL_API_KEY"\n`,
    );
    const before = accessLines().length;
    const r = await runProgram(bin('codex'), ['exec', '--skip-git-repo-check', 'Say hello.'], {
      HOME: tmp,
      CODEX_HOME: home,
      VIGIL_API_KEY: KEY,
    });
    results.push({ name: 'codex exec', ...r, requests: accessLines().slice(before) });
  }
  if (only === null || only === 'claude') {
    const before = accessLines().length;
    const r = await runProgram(bin('claude'), ['-p', 'Say hello.'], {
      HOME: tmp,
      ANTHROPIC_BASE_URL: base,
      ANTHROPIC_API_KEY: KEY,
      ANTHROPIC_MODEL: 'local',
      ANTHROPIC_SMALL_FAST_MODEL: 'local',
      ANTHROPIC_DEFAULT_HAIKU_MODEL: 'local',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
    });
    results.push({ name: 'claude -p', ...r, requests: accessLines().slice(before) });
  }
  let failed = 0;
  for (const r of results) {
    const apiError = /API Error|unexpected status|stream error|error=/i.test(r.out);
    const ok = r.code === 0 && !apiError;
    if (!ok) failed++;
    const turns = r.requests.filter((x) => /^\/v1\/(responses|messages)(\?|$)/.test(x.path ?? ''));
    console.log(
      `${r.name}: exit ${r.code}${apiError ? ', API error in its output' : ''}, ${turns.length} model request(s) — ${ok ? 'ok' : 'FAILED'}`,
    );
    if (!ok || args.includes('--verbose')) console.log(r.out.slice(-3000));
    for (const x of r.requests) console.log(`  ${describe(x)}`);
  }
  cleanup();
  process.exit(failed === 0 ? 0 : 1);
} catch (err) {
  log(`could not run: ${err.message}`);
  cleanup();
  process.exit(1);
}

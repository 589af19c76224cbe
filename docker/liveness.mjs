// The liveness probe of vigil's containers, and the restart requests the guardian makes.
// Node built-ins only: it is copied into the images next to the service, not installed.
//
//   node liveness.mjs probe --kind chat --url http://127.0.0.1:1337 --model tiny
//        [--request-timeout 75] [--kill-after 2] [--pid 1] [--state FILE] [--restart-request FILE]
//   node liveness.mjs probe --kind rpc --url http://127.0.0.1:8080 [same options]
//   node liveness.mjs request-restart FILE
//
// probe: one real request. `chat` is the inference probe of spec 8: a chat completion of at most
// 2 tokens at temperature 0 that must answer 200 with "content" within --request-timeout
// seconds; a full queue (429) or a model still loading (503 model_loading) is a server that
// answers, so it passes. `rpc` is the messaging daemon's JSON-RPC `version` over HTTP.
// Docker does not act on an unhealthy container (only on one that exits), so the probe acts
// itself: after --kill-after consecutive failures (counted in --state, which lives in the
// container's /tmp) it sends SIGTERM to --pid (1: the container's init, which passes it to the
// service; the service's shutdown is bounded) and the restart policy starts the container again.
// A restart request file (written by `request-restart`, i.e. by the guardian) is honoured the
// same way at the next probe, and removed first. Exit 0: healthy; 1: not (the line printed says
// why; Docker keeps it in `docker inspect`); 78: bad usage.
//
// request-restart: writes FILE (atomically) and exits 0; the guardian's `command` service
// manager runs it as its restart action, since inside compose it has no other way to restart a
// container (no Docker socket is given to it).
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename } from 'node:path';

const USAGE =
  'usage: liveness.mjs probe --kind chat|rpc --url URL [--model ID] [--request-timeout S] [--kill-after N] [--pid P] [--state FILE] [--restart-request FILE]\n' +
  '       liveness.mjs request-restart FILE';

function usage(message) {
  process.stderr.write(`liveness: ${message}\n${USAGE}\n`);
  return 78;
}

function parseFlags(args) {
  const flags = {};
  for (let i = 0; i < args.length; i += 2) {
    const name = args[i];
    const value = args[i + 1];
    if (!name?.startsWith('--') || value === undefined) throw new Error(`expected --flag value pairs, got "${name}"`);
    flags[name.slice(2)] = value;
  }
  return flags;
}

function readCount(file) {
  try {
    const n = JSON.parse(readFileSync(file, 'utf8')).failures;
    return Number.isInteger(n) && n >= 0 ? n : 0;
  } catch {
    return 0;
  }
}

function writeAtomic(file, text) {
  const tmp = `${file}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

async function request(kind, url, model, timeoutMs) {
  const started = performance.now();
  const body =
    kind === 'chat'
      ? { model, messages: [{ role: 'user', content: 'ping' }], max_tokens: 2, temperature: 0 }
      : { jsonrpc: '2.0', method: 'version', id: 1 };
  const path = kind === 'chat' ? '/v1/chat/completions' : '/api/v1/rpc';
  const ms = () => Math.round(performance.now() - started);
  let res;
  let text;
  try {
    res = await fetch(new URL(path, url), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (err) {
    const why =
      err?.name === 'TimeoutError'
        ? `no answer within ${timeoutMs / 1000} s`
        : (err?.cause?.code ?? err?.cause?.message ?? err?.message);
    return { ok: false, detail: `${path}: ${why} (${ms()} ms)` };
  }
  const snippet = text.replace(/\s+/g, ' ').slice(0, 160);
  if (kind === 'chat') {
    if (res.status === 200 && text.includes('"content"')) return { ok: true, detail: `completion in ${ms()} ms` };
    if (res.status === 429) return { ok: true, detail: `busy: queue full (429) in ${ms()} ms` };
    if (res.status === 503 && text.includes('model_loading')) return { ok: true, detail: 'model loading (503)' };
  } else if (res.status === 200) {
    try {
      const version = JSON.parse(text)?.result?.version;
      if (typeof version === 'string') return { ok: true, detail: `version ${version} in ${ms()} ms` };
    } catch {
      // not JSON: a failure, reported below
    }
  }
  return { ok: false, detail: `${path}: HTTP ${res.status} ${snippet} (${ms()} ms)` };
}

function terminate(pid, why) {
  try {
    process.kill(pid, 'SIGTERM');
    return `${why}: sent SIGTERM to pid ${pid}`;
  } catch (err) {
    return `${why}: could not signal pid ${pid}: ${err.code ?? err.message}`;
  }
}

async function probe(args) {
  let f;
  try {
    f = parseFlags(args);
  } catch (err) {
    return usage(err.message);
  }
  const kind = f.kind;
  if (kind !== 'chat' && kind !== 'rpc') return usage('--kind must be chat or rpc');
  if (!f.url) return usage('--url is required');
  if (kind === 'chat' && !f.model) return usage('--model is required with --kind chat');
  const timeoutS = Number(f['request-timeout'] ?? (kind === 'chat' ? 75 : 5));
  const killAfter = Number(f['kill-after'] ?? 0);
  const pid = Number(f.pid ?? 1);
  if (!(timeoutS > 0) || !Number.isInteger(killAfter) || killAfter < 0 || !Number.isInteger(pid) || pid < 1) {
    return usage('--request-timeout must be positive, --kill-after and --pid non-negative integers');
  }
  const state = f.state ?? `/tmp/vigil-liveness-${kind}.json`;

  const requestFile = f['restart-request'];
  if (requestFile) {
    let requested = null;
    try {
      requested = readFileSync(requestFile, 'utf8');
    } catch {
      // no request
    }
    if (requested !== null) {
      rmSync(requestFile, { force: true });
      writeAtomic(state, JSON.stringify({ failures: 0 }));
      process.stdout.write(`${terminate(pid, `restart requested (${basename(requestFile)}: ${requested.trim()})`)}\n`);
      return 1;
    }
  }

  const r = await request(kind, f.url, f.model, timeoutS * 1000);
  if (r.ok) {
    writeAtomic(state, JSON.stringify({ failures: 0 }));
    process.stdout.write(`ok: ${r.detail}\n`);
    return 0;
  }
  const failures = readCount(state) + 1;
  if (killAfter > 0 && failures >= killAfter) {
    writeAtomic(state, JSON.stringify({ failures: 0 }));
    process.stdout.write(`${terminate(pid, `failed ${failures} times in a row, last: ${r.detail}`)}\n`);
    return 1;
  }
  writeAtomic(state, JSON.stringify({ failures }));
  process.stdout.write(`failed (${failures}${killAfter > 0 ? ` of ${killAfter}` : ''}): ${r.detail}\n`);
  return 1;
}

function requestRestart(args) {
  if (args.length !== 1) return usage('request-restart takes one file');
  const file = args[0];
  try {
    writeAtomic(file, `${JSON.stringify({ requested_at: Date.now() / 1000, by: 'guardian' })}\n`);
  } catch (err) {
    process.stderr.write(`liveness: cannot write ${file}: ${err.code ?? err.message}\n`);
    return 1;
  }
  process.stdout.write(`restart requested: ${file}\n`);
  return 0;
}

const [command, ...rest] = process.argv.slice(2);
if (command === 'probe') process.exitCode = await probe(rest);
else if (command === 'request-restart') process.exitCode = requestRestart(rest);
else process.exitCode = usage(command === undefined ? 'no command' : `unknown command "${command}"`);

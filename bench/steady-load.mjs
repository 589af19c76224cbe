#!/usr/bin/env node
// Steady load, no false alarm (issue 30): the stack as `vigil start` runs it (free 127.0.0.1
// ports, mutual TLS and the health check off, the guardian on a 10 s tick, the generated model),
// under a steady mix of messages and completions for --minutes (30 by default), then one verdict:
// no restart of any service and no `probe_fail` in the guardian's log. Run by hand after
// `pnpm build` (it is not a `*.bench.mjs`, so `pnpm bench` leaves it out):
//
//   node bench/steady-load.mjs [--minutes 30] [--preset tiny|small] [--max-tokens 200]
//        [--message-every 1 | --message-rate 200] [--completion-every 2] [--interval 10]
//        [--retention-hours H] [--samples-out FILE]
//
// Bounded on disk and in memory (issue 29): every minute the bytes under the stack's home (the
// local network's file, the daemon's data, logs, state) and each service's RSS are sampled; the
// final table gives them at the start of the load, at half time and at the end, and says whether
// each stayed flat in the second half (its largest sample there at most the first half's largest
// + 5% + 1 MiB; a SQLite file and its WAL apart); `--samples-out FILE` writes every sample (JSON
// lines, bytes). `--message-rate N` sends N
// messages a second (paced, at most 64 in flight, kept-alive connections) instead of one every
// --message-every seconds; `--retention-hours H` sets the retention of the local network's tables
// (SIGNAL_DAEMON_LOCALNET_RETENTION_HOURS, which the stack passes on) so that it is reached in the
// run; the inbox is bounded by its own message and byte caps.
//
// Every --message-every seconds a JSON-RPC `send` to the daemon's HTTP listener (a note to its
// own account, `vigil start`'s default +15550000001: no second account is registered); every
// --completion-every seconds a chat completion of --max-tokens tokens (one at a time: a slow one
// is not joined by the next). Prints the counts each minute and a
// final table; exit 0 when nothing was restarted and no probe failed, 1 otherwise, 2 when it
// could not run. Traffic goes only to 127.0.0.1.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const VIGIL = join(ROOT, 'packages/stack/bin/vigil.js');
const INFERENCE = join(ROOT, 'packages/inference-server/bin/inference-server.js');
const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const MINUTES = Number(flag('minutes', '30'));
const PRESET = flag('preset', 'tiny');
const MAX_TOKENS = Number(flag('max-tokens', '200'));
const MESSAGE_EVERY = Number(flag('message-every', '1'));
const COMPLETION_EVERY = Number(flag('completion-every', '2'));
const INTERVAL = Number(flag('interval', '10'));
const MESSAGE_RATE = Number(flag('message-rate', '0'));
const RETENTION = flag('retention-hours', undefined);
const SAMPLES_OUT = flag('samples-out', undefined);
const { daemonClient, freePort, inferenceClient } = await import('../packages/shared-types/dist/node/index.js');
const log = (s) => console.error(`steady-load: ${s}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Bytes under a path (a file, or a directory walked whole). */
function bytesUnder(p) {
  let st;
  try {
    st = statSync(p);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.size;
  return readdirSync(p).reduce((sum, n) => sum + bytesUnder(join(p, n)), 0);
}
/** Resident set size of a pid in bytes (0 when it is gone). */
function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}
const samples = [];
function sample(home) {
  const row = { t: Date.now() };
  for (const n of readdirSync(home)) {
    if (n === 'models' || n === 'run') continue;
    // A SQLite file and its WAL apart: the WAL keeps the size it reached until it is truncated.
    const key = n === 'localnet.sqlite-shm' ? 'disk localnet.sqlite' : `disk ${n}`;
    row[key] = (row[key] ?? 0) + bytesUnder(join(home, n));
  }
  // The daemon's inbox on its own, beside its whole data directory.
  try {
    const data = join(home, 'signal-daemon');
    for (const n of readdirSync(data)) {
      if (!n.startsWith('inbox.sqlite')) continue;
      const key = `disk signal-daemon/${n === 'inbox.sqlite-shm' ? 'inbox.sqlite' : n}`;
      row[key] = (row[key] ?? 0) + bytesUnder(join(data, n));
    }
  } catch {}
  try {
    const services = JSON.parse(readFileSync(join(home, 'run/stack.json'), 'utf8')).services ?? {};
    for (const [name, s] of Object.entries(services)) row[`rss ${name}`] = rssOf(s.pid);
  } catch {}
  samples.push(row);
}
const MiB = (b) => (b / 2 ** 20).toFixed(1);
function sampleTable() {
  if (samples.length < 3) return 'too few samples';
  const first = samples[0];
  const half = samples[Math.floor((samples.length - 1) / 2)];
  const last = samples[samples.length - 1];
  const keys = Object.keys(last).filter((k) => k !== 't');
  const mid = Math.floor((samples.length - 1) / 2);
  const largest = (k, from, to) => Math.max(...samples.slice(from, to).map((r) => r[k] ?? 0));
  const rows = [
    '| what | start of load (MiB) | half time | end | largest, first half | largest, second half | flat in the second half |',
    '|---|---|---|---|---|---|---|',
  ];
  let allFlat = true;
  for (const k of keys) {
    // Flat: the second half never went past the first half's largest (+ 5% + 1 MiB). A WAL that
    // was truncated at half time and grew back to its working size is flat; a table that grows is not.
    const [before, after] = [largest(k, 0, mid + 1), largest(k, mid + 1, samples.length)];
    const flat = after <= before * 1.05 + 2 ** 20;
    allFlat &&= flat;
    rows.push(
      `| ${k} | ${MiB(first[k] ?? 0)} | ${MiB(half[k] ?? 0)} | ${MiB(last[k] ?? 0)} | ${MiB(before)} | ${MiB(after)} | ${flat ? 'yes' : 'no'} |`,
    );
  }
  return `${rows.join('\n')}\nall flat in the second half: ${allFlat ? 'yes' : 'no'}`;
}

const home = mkdtempSync(join(tmpdir(), 'vigil-steady-'));
let stack = null;
const counts = { messages: 0, messageErrors: 0, completions: 0, completionErrors: 0, tokens: 0 };
/** Why requests failed: the status (0: no answer) and the first 80 characters of the answer or error. */
const failures = new Map();
const failed = (what, err) => {
  const key = `${what}: ${String(err?.message ?? err).slice(0, 100)}`;
  failures.set(key, (failures.get(key) ?? 0) + 1);
};
async function stopStack() {
  if (!stack || stack.exitCode !== null) return;
  await new Promise((r) => execFile(process.execPath, [VIGIL, '--home', home, 'stop'], { timeout: 60_000 }, r));
  stack.kill('SIGKILL');
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => stopStack().finally(() => process.exit(2)));

try {
  mkdirSync(join(home, 'models'), { mode: 0o700 });
  const model = join(home, 'models/tiny.gguf');
  await new Promise((resolve, reject) =>
    execFile(process.execPath, [INFERENCE, 'make-model', '--out', model, '--preset', PRESET], (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  const [daemonHttp, tcp, relay, inference] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const lines = [];
  stack = spawn(
    process.execPath,
    [
      VIGIL,
      'start',
      '--home',
      home,
      '--daemon-http',
      `127.0.0.1:${daemonHttp}`,
      '--daemon-tcp',
      `127.0.0.1:${tcp}`,
      '--relay',
      `127.0.0.1:${relay}`,
      '--inference',
      `127.0.0.1:${inference}`,
      '--mtls',
      'off',
      '--guardian-interval',
      String(INTERVAL),
      '--health-interval',
      '0',
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      // The daemon reads its retentions from the environment too (the stack passes it on).
      env: RETENTION
        ? {
            ...process.env,
            SIGNAL_DAEMON_LOCALNET_RETENTION_HOURS: RETENTION,
          }
        : process.env,
    },
  );
  for (const s of [stack.stdout, stack.stderr]) {
    s.setEncoding('utf8');
    s.on('data', (c) => lines.push(...c.split('\n').filter(Boolean)));
  }
  const t0 = Date.now();
  while (!lines.some((l) => l.startsWith('vigil is running'))) {
    if (stack.exitCode !== null || Date.now() - t0 > 180_000)
      throw new Error(`the stack did not start:\n${lines.join('\n')}`);
    await sleep(200);
  }
  log(`the stack runs (home ${home}); ${MINUTES} min of load`);
  const end = Date.now() + MINUTES * 60_000;
  const daemon = daemonClient({ host: '127.0.0.1', port: daemonHttp }, { timeoutMs: 10_000 });
  // Paced sends reuse their connections (200 a second would otherwise open 200 a second).
  const pacedDaemon = daemonClient({ host: '127.0.0.1', port: daemonHttp }, { timeoutMs: 10_000, keepAlive: true });
  const completer = inferenceClient({ address: { host: '127.0.0.1', port: inference } }, { timeoutMs: 120_000 });
  const send = (client, i) =>
    client.rpc('send', { recipient: ['+15550000001'], message: `steady ${i}` }).then(
      () => {
        counts.messages++;
      },
      (err) => {
        counts.messageErrors++;
        failed('send', err);
      },
    );
  const paced = async () => {
    // N a second: each 10 ms, the sends that are due, at most 64 in flight.
    const start = Date.now();
    let sent = 0;
    let inFlight = 0;
    while (Date.now() < end) {
      const due = Math.floor(((Date.now() - start) / 1000) * MESSAGE_RATE);
      while (sent < due && inFlight < 64) {
        inFlight++;
        send(pacedDaemon, sent++).finally(() => inFlight--);
      }
      await sleep(10);
    }
    while (inFlight > 0) await sleep(10);
    pacedDaemon.wire.close();
  };
  const messages =
    MESSAGE_RATE > 0
      ? paced()
      : (async () => {
          for (let i = 0; Date.now() < end; i++) {
            await send(daemon, i);
            await sleep(MESSAGE_EVERY * 1000);
          }
        })();
  const completions = (async () => {
    while (Date.now() < end) {
      const r = await completer
        .chat({ model: 'vigil', messages: [{ role: 'user', content: 'Tell a long story.' }], max_tokens: MAX_TOKENS })
        .catch((err) => ({ status: 0, text: err.message }));
      if (r.status === 200) {
        counts.completions++;
        counts.tokens += JSON.parse(r.text).usage?.completion_tokens ?? 0;
      } else {
        counts.completionErrors++;
        failed('completion', { message: `${r.status} ${r.text}` });
      }
      await sleep(COMPLETION_EVERY * 1000);
    }
  })();
  sample(home);
  const ticker = setInterval(() => {
    sample(home);
    log(JSON.stringify(counts));
  }, 60_000);
  await Promise.all([messages, completions]);
  clearInterval(ticker);
  sample(home);
  const guardian = readFileSync(join(home, 'logs/guardian.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const byEvent = {};
  for (const e of guardian) byEvent[e.event] = (byEvent[e.event] ?? 0) + 1;
  const restarts = lines.filter((l) => /restarting in|watchdog expired|not restarted/.test(l));
  console.log(`\nsteady load, ${MINUTES} min, guardian tick ${INTERVAL} s, model ${PRESET}`);
  console.log(
    `messages sent ${counts.messages} (errors ${counts.messageErrors}); completions ${counts.completions} (errors ${counts.completionErrors}), ${counts.tokens} tokens`,
  );
  for (const [key, n] of failures) console.log(`failed: ${n} × ${key}`);
  console.log(`guardian events: ${JSON.stringify(byEvent)}`);
  console.log(`\nbytes on disk and RSS (sampled each minute):\n${sampleTable()}\n`);
  if (SAMPLES_OUT) writeFileSync(SAMPLES_OUT, `${samples.map((r) => JSON.stringify(r)).join('\n')}\n`);
  console.log(`supervisor restarts: ${restarts.length}${restarts.length ? `\n  ${restarts.join('\n  ')}` : ''}`);
  const ok = restarts.length === 0 && !byEvent.probe_fail && !byEvent.restarting;
  console.log(`no false alarm: ${ok ? 'yes' : 'no'}`);
  process.exitCode = ok ? 0 : 1;
} catch (err) {
  log(err.stack ?? String(err));
  process.exitCode = 2;
} finally {
  await stopStack();
  rmSync(home, { recursive: true, force: true });
}

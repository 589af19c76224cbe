#!/usr/bin/env node
// Steady load, no false alarm (issue 30): the stack as `vigil start` runs it (free 127.0.0.1
// ports, mutual TLS and the health check off, the guardian on a 10 s tick, the generated model),
// under a steady mix of messages and completions for --minutes (30 by default), then one verdict:
// no restart of any service and no `probe_fail` in the guardian's log. Run by hand after
// `pnpm build` (it is not a `*.bench.mjs`, so `pnpm bench` leaves it out):
//
//   node bench/steady-load.mjs [--minutes 30] [--preset tiny|small] [--max-tokens 200]
//        [--message-every 1] [--completion-every 2] [--interval 10]
//
// Every --message-every seconds a JSON-RPC `send` to the daemon's HTTP listener (a note to its
// own account, `vigil start`'s default +15550000001: no second account is registered); every
// --completion-every seconds a chat completion of --max-tokens tokens (one at a time: a slow one
// is not joined by the next). Prints the counts each minute and a
// final table; exit 0 when nothing was restarted and no probe failed, 1 otherwise, 2 when it
// could not run. Traffic goes only to 127.0.0.1.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
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
const { daemonClient, inferenceClient } = await import('../packages/shared-types/dist/node/index.js');
const log = (s) => console.error(`steady-load: ${s}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

const home = mkdtempSync(join(tmpdir(), 'vigil-steady-'));
let stack = null;
const counts = { messages: 0, messageErrors: 0, completions: 0, completionErrors: 0, tokens: 0 };
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
    { stdio: ['ignore', 'pipe', 'pipe'] },
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
  const completer = inferenceClient({ address: { host: '127.0.0.1', port: inference } }, { timeoutMs: 120_000 });
  const messages = (async () => {
    for (let i = 0; Date.now() < end; i++) {
      try {
        await daemon.rpc('send', { recipient: ['+15550000001'], message: `steady ${i}` });
        counts.messages++;
      } catch {
        counts.messageErrors++;
      }
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
      } else counts.completionErrors++;
      await sleep(COMPLETION_EVERY * 1000);
    }
  })();
  const ticker = setInterval(() => log(JSON.stringify(counts)), 60_000);
  await Promise.all([messages, completions]);
  clearInterval(ticker);
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
  console.log(`guardian events: ${JSON.stringify(byEvent)}`);
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

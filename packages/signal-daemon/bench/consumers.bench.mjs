#!/usr/bin/env node
// The cost of per-consumer marks: send -> SSE latency at a paced 1,000 msg/s with 1, 2 and 5
// consumers (each its own named stream, so each has its own durable mark), in one run, the
// 1-consumer figures being the baseline. Run `pnpm build` first, then:
//
//   node packages/signal-daemon/bench/consumers.bench.mjs [--quick]
//
// Two daemons through the CLI on one local network file in a temporary directory: `send` to B
// over A's TCP listener, each message carrying its send time; B's consumers read the event
// stream (`sse`, then `?consumer=c2` ... `c5`, declared with --consumer). Each setting: a warm-up,
// then a measuring window; the order is 1, 2, 5, 1 (the two 1-consumer runs bracket the others,
// their mean is the baseline; a warm-up run before them is not counted). Reported: latency
// p50/p99 over every consumer's arrivals, B's CPU per message (from /proc), messages lost or
// duplicated. Traffic only to 127.0.0.1; every
// phase bounded; child processes and the directory removed at the end.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { daemonClient, freePort } from '@vigil/shared-types/node';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'signal-daemon.js');
const HOST = '127.0.0.1';
const A = '+15550000001';
const B = '+15550000002';
const QUICK = process.argv.includes('--quick');
const WARMUP_MS = QUICK ? 300 : 1000;
const MEASURE_MS = QUICK ? 1500 : 4000;
const RATE = 1000;
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
let tmp = null;

async function startDaemon(account, localnet, dataDir, extra = []) {
  const http = await freePort();
  const tcp = await freePort();
  const child = spawn(
    process.execPath,
    [CLI, '-a', account, '--http', `${HOST}:${http}`, '--tcp', `${HOST}:${tcp}`, '--localnet', localnet].concat([
      '--data-dir',
      dataDir,
      '--log-level',
      'warn',
      ...extra,
    ]),
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  children.push(child);
  for (let i = 0; i < 300; i++) {
    const ok = await daemonClient({ host: HOST, port: http }, { timeoutMs: 2000 })
      .check()
      .catch(() => false);
    if (ok) return { child, http, tcp };
    await sleep(50);
  }
  throw new Error(`daemon ${account} did not start`);
}

/** An event stream as consumer `name`, calling onMessage(text, arrivalMs) for each message. */
function stream(port, name, onMessage) {
  return new Promise((resolve, reject) => {
    const path = `/api/v1/events${name === 'sse' ? '' : `?consumer=${name}`}`;
    const req = request({ host: HOST, port, path, agent: false }, (res) => {
      res.setEncoding('utf8');
      let buf = '';
      res.on('data', (chunk) => {
        const t = now();
        buf += chunk;
        let end = buf.indexOf('\n\n');
        while (end >= 0) {
          const m = /"message":"([^"]*)"/.exec(buf.slice(0, end));
          if (m) onMessage(m[1], t);
          buf = buf.slice(end + 2);
          end = buf.indexOf('\n\n');
        }
      });
      resolve({ close: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
}

const cpuMs = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
};

function pct(xs, p) {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

async function run(a, b, consumers, tag) {
  const names = ['sse', 'c2', 'c3', 'c4', 'c5'].slice(0, consumers);
  const got = names.map(() => new Map());
  const lat = [];
  let measuring = false;
  const streams = await Promise.all(
    names.map((name, i) =>
      stream(b.http, name, (text, t) => {
        const [tg, seq, sent] = text.split(':');
        if (tg !== tag) return;
        got[i].set(seq, (got[i].get(seq) ?? 0) + 1);
        if (measuring && Number(seq) > 0) lat.push(t - Number(sent));
      }),
    ),
  );
  const sock = connect({ host: HOST, port: a.tcp });
  sock.setNoDelay(true);
  sock.on('data', () => {});
  await new Promise((r) => sock.once('connect', r));
  await sleep(200);
  let seq = 0;
  const start = now();
  const send = () => {
    const due = Math.floor(((now() - start) / 1000) * RATE);
    const target = Math.min(due, seq + 50); // a stalled tick does not burst
    let out = '';
    while (seq < target) {
      seq++;
      out += `{"jsonrpc":"2.0","method":"send","params":{"recipient":"${B}","message":"${tag}:${seq}:${now()}"},"id":${seq}}\n`;
    }
    if (out) sock.write(out);
  };
  const timer = setInterval(send, 1);
  await sleep(WARMUP_MS);
  measuring = true;
  const c1 = cpuMs(b.child.pid);
  const s1 = seq;
  await sleep(MEASURE_MS);
  const c2 = cpuMs(b.child.pid);
  const s2 = seq;
  measuring = false;
  clearInterval(timer);
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline && got.some((g) => g.size < seq)) await sleep(20);
  await sleep(200);
  sock.destroy();
  for (const s of streams) s.close();
  const lost = got.reduce((n, g) => n + (seq - g.size), 0);
  const dups = got.reduce((n, g) => n + [...g.values()].filter((c) => c > 1).length, 0);
  return { consumers, p50: pct(lat, 50), p99: pct(lat, 99), cpuUsPerMsg: ((c2 - c1) * 1000) / (s2 - s1), lost, dups };
}

async function main() {
  tmp = mkdtempSync(join(tmpdir(), 'vigil-consumers-bench-'));
  const localnet = join(tmp, 'localnet.sqlite');
  const a = await startDaemon(A, localnet, join(tmp, 'a'));
  const b = await startDaemon(
    B,
    localnet,
    join(tmp, 'b'),
    ['c2', 'c3', 'c4', 'c5'].flatMap((c) => ['--consumer', c]),
  );
  process.stderr.write('bench: warm-up run (not counted)\n');
  await run(a, b, 1, 'warm');
  const results = [];
  for (const [i, k] of [1, 2, 5, 1].entries()) {
    process.stderr.write(`bench: ${k} consumer(s)\n`);
    results.push(await run(a, b, k, `r${i}`));
  }
  const base = [results[0], results[3]];
  const mid = (f) => (f(base[0]) + f(base[1])) / 2;
  const rows = [['consumers', 'p50 ms', 'p99 ms', 'B CPU us/msg', 'p50 ratio', 'p99 ratio', 'lost', 'dup']];
  for (const r of results) {
    rows.push([
      String(r.consumers),
      r.p50.toFixed(2),
      r.p99.toFixed(2),
      r.cpuUsPerMsg.toFixed(0),
      `${(r.p50 / mid((x) => x.p50)).toFixed(2)}x`,
      `${(r.p99 / mid((x) => x.p99)).toFixed(2)}x`,
      String(r.lost),
      String(r.dups),
    ]);
  }
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  process.stdout.write(
    `\nper-consumer marks: send -> SSE at ${RATE} msg/s, ${WARMUP_MS} ms warm-up + ${MEASURE_MS} ms; ` +
      'ratio against the mean of the two 1-consumer runs (first and last)\n\n',
  );
  for (const r of rows) process.stdout.write(`${r.map((c, i) => c.padStart(w[i])).join('  ')}\n`);
  const bad = results.filter((r) => r.lost > 0 || r.dups > 0);
  process.stdout.write(
    bad.length ? '\nmessages lost or duplicated: see the table\n' : '\nno message lost or duplicated\n',
  );
}

const watchdog = setTimeout(() => {
  process.stderr.write('bench: still running after 120 s: stopping\n');
  process.exit(1);
}, 120_000);
try {
  await main();
} catch (err) {
  process.stderr.write(`bench: failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
} finally {
  clearTimeout(watchdog);
  for (const c of children) c.kill('SIGTERM');
  await sleep(300);
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}

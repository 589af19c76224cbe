#!/usr/bin/env node
// Benchmark of the guardian's own cost per tick. Run `pnpm build` first, then:
//
//   node packages/guardian/bench/guardian.bench.mjs [--ticks N] [--json]
//
// A fast server (fast-server.mjs, a child process: fixed replies, and an access log as the
// inference server writes one) stands in for the inference server. In this process, N ticks
// (default 10,000) of the built guardian with interval 0 (one after the other), against that
// server, with the vigil configuration a host would have: the primary's log and access log read
// every tick, the lock file looked for, the state file locked, read and written atomically
// (fsync) every tick, one event appended per tick, the model list, canary and integrity check on
// their cadences. The baseline, in the same run, is the bare request loop: the same probe request
// through the inference client of shared-types with the prober's options, N times. Rounds alternate (baseline, guardian) so that both
// see the same machine.
//
// Reported: time per tick; the overhead per tick excluding the probe's wait (the tick's time
// minus the time spent inside the probe, measured around it); memory growth over the ticks (the
// heap after full collections before and after each round of ticks, summed), against the bare
// loop's; the process's RSS for information (the allocator keeps pages it got, so RSS is no
// measure of a leak). Goals: < 5 ms overhead per tick, < 5 MB growth. It prints one table; the exit code is 0 when the run completed (goals met or
// not), 1 when it could not run. Traffic goes only to 127.0.0.1.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

if (typeof globalThis.gc !== 'function') {
  // Memory is measured after full collections: run again with --expose-gc.
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
  });
  process.exit(r.status ?? 1);
}

const HERE = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const flag = (name, def) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const TICKS = Number(flag('ticks', '10000'));
const JSON_OUT = args.includes('--json');
const ROUNDS = 5;
const WARMUP = Math.min(500, Math.ceil(TICKS / 10));
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const { Guardian, parseConfig } = await import('../dist/index.js');
const { probeRequest } = await import('@vigil/shared-types');
const { inferenceClient } = await import('@vigil/shared-types/node');

const tmp = mkdtempSync(join(tmpdir(), 'vigil-guardian-bench-'));
const access = join(tmp, 'access.log');
const server = spawn(process.execPath, [join(HERE, 'fast-server.mjs'), '--access-log', access], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const watchdog = setTimeout(() => {
  log('the run took too long: stopped');
  server.kill('SIGKILL');
  process.exit(1);
}, 600_000);

try {
  const port = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.setEncoding('utf8');
    server.stdout.on('data', (s) => {
      out += s;
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]).port);
    });
    server.on('exit', (code) => reject(new Error(`the fast server exited with ${code}`)));
  });

  writeFileSync(join(tmp, 'inference.log'), '');
  writeFileSync(join(tmp, 'inference-server'), 'a binary');
  const config = parseConfig(
    {
      intervalS: 0,
      stateFile: 'state.json',
      lockFile: 'fallback.lock',
      logFile: 'guardian.log',
      primary: {
        http: `127.0.0.1:${port}`,
        model: 'tiny',
        service: { kind: 'command', restart: ['true'] },
        log: 'inference.log',
        accessLog: 'access.log',
        binary: 'inference-server',
      },
    },
    tmp,
  );
  const guardian = new Guardian(config);
  // Time spent inside the probe (the request and the wait for the reply), per tick.
  let probeNs = 0n;
  const prober = guardian.prober;
  const probe = prober.probe.bind(prober);
  prober.probe = async (...a) => {
    const t = process.hrtime.bigint();
    try {
      return await probe(...a);
    } finally {
      probeNs += process.hrtime.bigint() - t;
    }
  };

  // The baseline: the same request through the same client, with the prober's options.
  const client = inferenceClient(
    { address: { host: '127.0.0.1', port } },
    { timeoutMs: 20_000, maxBytes: 1 << 20, userAgent: 'vigil-guardian' },
  );
  const bare = async () => {
    const res = await client.request({
      method: 'POST',
      path: '/v1/chat/completions',
      body: probeRequest('tiny', 'ping'),
      headers: { 'x-bench-baseline': '1' },
    });
    if (!res.text.includes('"content"')) throw new Error('bad reply');
  };
  const tick = async () => {
    const exit = await guardian.tick();
    if (exit !== null) throw new Error(`the guardian stopped with ${exit}`);
  };

  const mem = () => {
    globalThis.gc();
    globalThis.gc();
    const m = process.memoryUsage();
    return { heap: m.heapUsed, rss: m.rss };
  };
  const measure = async (fn, n) => {
    const times = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      await fn();
      times[i] = Number(process.hrtime.bigint() - t) / 1e6;
    }
    return times;
  };

  log(`warm-up (${WARMUP} of each)`);
  await measure(bare, WARMUP);
  await measure(tick, WARMUP);

  const per = Math.ceil(TICKS / ROUNDS);
  const bareTimes = [];
  const tickTimes = [];
  let bareGrowth = { heap: 0 };
  let tickGrowth = { heap: 0 };
  const rss0 = mem().rss;
  let probeMs = 0;
  for (let r = 0; r < ROUNDS; r++) {
    log(`round ${r + 1}/${ROUNDS}: ${per} bare requests, ${per} ticks`);
    let m0 = mem();
    bareTimes.push(...(await measure(bare, per)));
    let m1 = mem();
    bareGrowth = { heap: bareGrowth.heap + m1.heap - m0.heap };
    m0 = mem();
    probeNs = 0n;
    tickTimes.push(...(await measure(tick, per)));
    probeMs += Number(probeNs) / 1e6;
    m1 = mem();
    tickGrowth = { heap: tickGrowth.heap + m1.heap - m0.heap };
  }
  const rssEnd = mem().rss;
  guardian.close();
  // Every tick must have probed (none deferred as busy, none failed).
  const events = readFileSync(join(tmp, 'guardian.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const probed = events.filter((e) => e.event === 'probe_ok').length;
  if (probed !== ROUNDS * Math.ceil(TICKS / ROUNDS) + WARMUP) {
    const other = [...new Set(events.map((e) => e.event))].join(', ');
    throw new Error(`${probed} probe_ok for ${ROUNDS * Math.ceil(TICKS / ROUNDS) + WARMUP} ticks (events: ${other})`);
  }

  const sum = (a) => a.reduce((x, y) => x + y, 0);
  const pct = (a, p) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor((a.length * p) / 100))];
  const ticks = tickTimes.length;
  const tickMean = sum(tickTimes) / ticks;
  const bareMean = sum(bareTimes) / bareTimes.length;
  const overhead = (sum(tickTimes) - probeMs) / ticks;
  const MB = 1024 * 1024;
  const f = (x, d = 3) => x.toFixed(d);
  const rows = [
    [
      'time per tick, ms (mean; p50 / p99)',
      `${f(tickMean)}; ${f(pct(tickTimes, 50))} / ${f(pct(tickTimes, 99))}`,
      `${f(bareMean)}; ${f(pct(bareTimes, 50))} / ${f(pct(bareTimes, 99))}`,
      f(tickMean / bareMean, 2),
      '—',
      '—',
    ],
    ['overhead per tick excluding the probe, ms (mean)', f(overhead), '—', '—', '< 5 ms', overhead < 5 ? 'yes' : 'no'],
    [
      'overhead per tick vs the bare request, ms (mean)',
      f(tickMean - bareMean),
      '—',
      '—',
      '< 5 ms',
      tickMean - bareMean < 5 ? 'yes' : 'no',
    ],
    [
      `memory growth over ${ticks} ticks (heap after full GC, summed over the rounds), MB`,
      f(tickGrowth.heap / MB, 2),
      f(bareGrowth.heap / MB, 2),
      '—',
      '< 5 MB',
      tickGrowth.heap / MB < 5 ? 'yes' : 'no',
    ],
    [
      'RSS of the process after warm-up → at the end, MB',
      `${f(rss0 / MB, 1)} → ${f(rssEnd / MB, 1)}`,
      '—',
      '—',
      '—',
      '—',
    ],
  ];
  console.log(
    `\nguardian: ${ticks} ticks with interval 0 against a fast server, baseline: the bare request loop (same client)\n`,
  );
  console.log('| measure | guardian | baseline | ratio | goal | met |');
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  if (JSON_OUT) {
    console.log(
      JSON.stringify({
        ticks,
        tickMeanMs: tickMean,
        bareMeanMs: bareMean,
        overheadMs: overhead,
        heapGrowthMB: tickGrowth.heap / MB,
        rssStartMB: rss0 / MB,
        rssEndMB: rssEnd / MB,
      }),
    );
  }
} catch (err) {
  log(`failed: ${err instanceof Error ? err.stack : err}`);
  process.exitCode = 1;
} finally {
  clearTimeout(watchdog);
  server.kill('SIGTERM');
  rmSync(tmp, { recursive: true, force: true });
}

#!/usr/bin/env node
// Benchmark of the status page over a week of history. Run `pnpm build` first, then:
//
//   pnpm bench status-page        (or: node packages/stack/bench/status-page.bench.mjs [--runs=N])
//
// It writes a home with 7 days of guardian log at 10 s ticks (~60,500 events) and 2,000
// health-check runs (no supervisor; the services' addresses answer nothing), starts
// `vigil status-page` on it as a real process, and measures from new connections:
//   1. the first HTML: the first GET / once the page has published its address;
//   2. GET / again (median of N, and the slowest);
//   3. the page's weight with its assets.
// Baseline in the same run: GET of the page's style sheet from the same process (no work: the
// floor of one request). Goals: first HTML < 300 ms; whole page < 300 KB. Prints one table
// (measure | value | baseline | ratio | goal | met); exit 0 when it ran, 1 when it could not.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@vigil/shared-types/node';

const HERE = dirname(fileURLToPath(import.meta.url));
const { writeSampleHistory } = await import(join(HERE, '..', 'dist', 'status-page', 'sample.js'));
const VIGIL = join(HERE, '..', 'bin', 'vigil.js');
const RUNS = Number(process.argv.find((a) => a.startsWith('--runs='))?.slice(7) ?? 21);

const get = (port, path) =>
  new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c) => {
        bytes += c.length;
      });
      res.on('end', () => resolve({ ms: performance.now() - t0, bytes, status: res.statusCode }));
    });
    req.on('error', reject);
    req.end();
  });
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const home = mkdtempSync(join(tmpdir(), 'vigil-page-bench-'));
let child;
try {
  const t = performance.now();
  const sample = writeSampleHistory(home, { days: 7, tickS: 10, healthRuns: 2000, closedPort: await freePort() });
  const wroteMs = performance.now() - t;
  const port = await freePort();
  const started = performance.now();
  child = spawn(process.execPath, [VIGIL, '--home', home, 'status-page', '--listen', `127.0.0.1:${port}`], {
    stdio: 'ignore',
  });
  const address = join(home, 'run', 'status-page.json');
  while (!existsSync(address) || !readFileSync(address, 'utf8').includes(String(port))) {
    if (performance.now() - started > 60_000) throw new Error('the status page did not start within 60 s');
    await new Promise((r) => setTimeout(r, 10));
  }
  const readyMs = performance.now() - started;
  const first = await get(port, '/');
  const pages = [];
  const floors = [];
  for (let i = 0; i < RUNS; i++) {
    await new Promise((r) => setTimeout(r, 300)); // past the 250 ms a snapshot may be reused
    pages.push((await get(port, '/')).ms);
    floors.push((await get(port, '/assets/page.css')).ms);
  }
  const css = await get(port, '/assets/page.css');
  const js = await get(port, '/assets/page.js');
  const weight = first.bytes + css.bytes + js.bytes;
  const floor = median(floors);
  const rows = [
    ['start to address published (reads the whole history)', `${readyMs.toFixed(0)} ms`, '', '', '', ''],
    [
      'first HTML',
      `${first.ms.toFixed(1)} ms`,
      `${floor.toFixed(1)} ms`,
      `${(first.ms / floor).toFixed(1)}x`,
      '< 300 ms',
      first.ms < 300 ? 'yes' : 'NO',
    ],
    [
      `HTML again (median of ${RUNS})`,
      `${median(pages).toFixed(1)} ms`,
      `${floor.toFixed(1)} ms`,
      `${(median(pages) / floor).toFixed(1)}x`,
      '< 300 ms',
      median(pages) < 300 ? 'yes' : 'NO',
    ],
    ['HTML again (slowest)', `${Math.max(...pages).toFixed(1)} ms`, '', '', '', ''],
    [
      'page weight (HTML + CSS + JS)',
      `${(weight / 1024).toFixed(1)} KB`,
      '',
      '',
      '< 300 KB',
      weight < 300 * 1024 ? 'yes' : 'NO',
    ],
  ];
  console.log(
    `status page over ${sample.events} guardian events and ${sample.healthRuns} health runs (written in ${wroteMs.toFixed(0)} ms)`,
  );
  const head = ['measure', 'value', 'baseline (style sheet)', 'ratio', 'goal', 'met'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i])).join('  '));
} catch (err) {
  process.stderr.write(`status-page bench: ${err.stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  child?.kill('SIGTERM');
  rmSync(home, { recursive: true, force: true });
}

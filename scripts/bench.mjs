#!/usr/bin/env node
// Runs every benchmark under bench/ and packages/*/bench/ (files named *.bench.mjs, importing
// the built packages), one after another, each printing its own table. Benchmarks are not tests: they measure ratios against a baseline in the same run.
// Pass names to run only some: `pnpm bench relay`. What follows the names, from the first argument
// that starts with a dash, is passed to each benchmark run: `pnpm bench daemon --quick --only=sse`.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dirs = [
  join(root, 'bench'),
  ...readdirSync(join(root, 'packages')).map((p) => join(root, 'packages', p, 'bench')),
];
const args = process.argv.slice(2);
const firstFlag = args.findIndex((a) => a.startsWith('-'));
const filters = firstFlag < 0 ? args : args.slice(0, firstFlag);
const passed = firstFlag < 0 ? [] : args.slice(firstFlag);
const benches = dirs
  .filter((d) => existsSync(d))
  .flatMap((d) =>
    readdirSync(d)
      .filter((f) => /\.bench\.m?js$/.test(f))
      .map((f) => join(d, f)),
  )
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));

if (benches.length === 0) {
  console.log('bench: no benchmarks found');
  process.exit(0);
}
let failed = 0;
for (const file of benches) {
  console.log(`\n=== ${file.slice(root.length + 1)}`);
  const r = spawnSync(process.execPath, [file, ...passed], { stdio: 'inherit', cwd: root });
  if (r.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);

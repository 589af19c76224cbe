#!/usr/bin/env node
// Runs the whole jest suite (ESM), writes jest's JSON results to .reports/jest.json and ends
// with one line "N passed, N failed" computed from them. Extra arguments go to jest
// (e.g. `pnpm test packages/shared-types`). Exit code: jest's, or 1 when no results came back.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const reports = join(root, '.reports');
const results = join(reports, 'jest.json');
mkdirSync(reports, { recursive: true });
rmSync(results, { force: true });

const jest = join(dirname(createRequire(import.meta.url).resolve('jest/package.json')), 'bin', 'jest.js');
const run = spawnSync(
  process.execPath,
  [
    '--experimental-vm-modules',
    '--no-warnings=ExperimentalWarning',
    jest,
    '--json',
    `--outputFile=${results}`,
    ...process.argv.slice(2),
  ],
  {
    cwd: root,
    stdio: 'inherit',
    env: {
      ...process.env,
      FORCE_COLOR: process.env.FORCE_COLOR ?? '0',
      // Two test workers share the cores: a model at SCHED_IDLE (the inference server's default)
      // would wait for the other worker's every busy moment, and the tests' time limits are not
      // about that. The idle policy has tests of its own (inference-server/test/worker-priority),
      // which set it themselves.
      INFERENCE_SERVER_WORKER_SCHED: process.env.INFERENCE_SERVER_WORKER_SCHED ?? 'normal',
    },
  },
);

let passed = 0;
let failed = 0;
try {
  const r = JSON.parse(readFileSync(results, 'utf8'));
  passed = r.numPassedTests;
  // A suite that failed to run (syntax error, crash) has no failed tests of its own: count it.
  failed = r.numFailedTests + r.numRuntimeErrorTestSuites;
} catch {
  failed = 1;
  console.error('test: jest wrote no results');
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(run.status === 0 && failed === 0 ? 0 : run.status || 1);

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VIGIL = join(ROOT, 'packages/stack/bin/vigil.js');
const HEALTH = join(ROOT, 'packages/health-check/bin/health-check.js');
/** Makes every import of zod fail (zod and the schemas cost ~90 ms of start-up). */
const NO_ZOD = join(ROOT, 'test/fixtures/no-zod.mjs');

const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, ['--import', NO_ZOD, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
  });

describe('command-line start-up loads only what the command needs', () => {
  it('health-check --help and --version, vigil --help, status and logs never load zod', () => {
    const home = mkdtempSync(join(tmpdir(), 'vigil-startup-'));
    try {
      for (const args of [
        [HEALTH, '--help'],
        [HEALTH, '--version'],
        [VIGIL, '--help'],
        [VIGIL, '--home', home, 'status'],
        [VIGIL, '--home', home, 'logs', 'guardian'],
      ]) {
        const r = run(args);
        expect(`${args.slice(1).join(' ')}: ${r.stderr}`).not.toContain('zod was loaded');
        expect(r.status === 0 || /no vigil stack is running|no log/i.test(r.stderr)).toBe(true);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it('the commands that need the schemas still load them (the tripwire works)', () => {
    const home = mkdtempSync(join(tmpdir(), 'vigil-startup-'));
    try {
      const help = run([VIGIL, 'start', '--help']);
      expect(help.stderr).toContain('zod was loaded');
      const check = run([HEALTH, '--json'], { XDG_STATE_HOME: home });
      expect(check.stderr).toContain('zod was loaded');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';

const run = promisify(execFile);
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(`${pkgDir}/package.json`, 'utf8')) as {
  version: string;
  bin: Record<string, string>;
};
const bin = `${pkgDir}/${pkg.bin['signal-daemon']}`;

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('signal-daemon command line', () => {
  it('prints the package version with --version and exits 0', async () => {
    expect(await cli('--version')).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
  });

  it('prints usage with --help and exits 0', async () => {
    const r = await cli('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: signal-daemon /);
    expect(r.stdout).toContain('--version');
  });

  it('refuses an unknown flag with a clear message and the configuration exit code', async () => {
    const r = await cli('--account', '+15550000001', '--no-such-flag');
    expect(r.code).toBe(78);
    expect(r.stderr).toContain("unknown option '--no-such-flag'");
  });
});

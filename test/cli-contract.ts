/**
 * The command-line contract every vigil binary keeps: `--version` prints the package version,
 * `--help` prints usage, an unknown flag is refused with exit code 78. Each package's
 * test/cli.test.ts runs it against its built binary.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from '@jest/globals';

const run = promisify(execFile);

export async function runBin(bin: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { timeout: 15_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/**
 * `required` are arguments the binary needs before it looks at any other flag; `usageExit` is its
 * exit code for bad usage (78, EX_CONFIG; the health check says 3, "could not run", as Nagios).
 */
export function describeCommandLine(pkgDir: string, name: string, required: string[] = [], usageExit = 78): void {
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as {
    version: string;
    bin: Record<string, string>;
  };
  const bin = join(pkgDir, pkg.bin[name] ?? `bin/${name}.js`);

  describe(`${name} command line`, () => {
    it('prints the package version with --version and exits 0', async () => {
      expect(await runBin(bin, ['--version'])).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: '' });
    });

    it('prints usage with --help and exits 0', async () => {
      const r = await runBin(bin, ['--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^Usage: ${name} `));
      expect(r.stdout).toContain('--version');
    });

    it('refuses an unknown flag with a clear message and its usage exit code', async () => {
      const r = await runBin(bin, [...required, '--no-such-flag']);
      expect(r.code).toBe(usageExit);
      expect(r.stderr).toContain("unknown option '--no-such-flag'");
    });
  });
}

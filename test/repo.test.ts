import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const packages = readdirSync(join(root, 'packages')).filter((d) => statSync(join(root, 'packages', d)).isDirectory());
const services = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check'];

describe('the repository', () => {
  it('runs in CI exactly the test command the README gives', () => {
    const m = /^TEST_COMMAND='(.+)'$/m.exec(read('.ci/run'));
    expect(m).not.toBeNull();
    const readme = read('README.md');
    const commands = [...readme.matchAll(/^```sh\n(.+)\n```$/gm)].map((x) => x[1]);
    // The README opens with the two one-line commands: start the stack, run the tests.
    expect(commands.slice(0, 2)).toEqual([expect.stringMatching(/pnpm start$/), m?.[1]]);
    expect(statSync(join(root, '.ci/run')).mode & 0o111).not.toBe(0);
  });

  it('has every package of DESIGN.md, each with the layout the conventions ask for', () => {
    expect(packages.sort()).toEqual(['shared-types', ...services].sort());
    for (const dir of packages) {
      const pkg = JSON.parse(read(`packages/${dir}/package.json`)) as {
        name: string;
        type: string;
        bin?: Record<string, string>;
      };
      expect(pkg.name).toBe(`@vigil/${dir}`);
      expect(pkg.type).toBe('module');
      expect(read(`packages/${dir}/README.md`)).toMatch(/^# /);
      expect(existsSync(join(root, 'packages', dir, 'test'))).toBe(true);
      if (services.includes(dir)) {
        expect(Object.keys(pkg.bin ?? {})).toEqual([dir]);
        const bin = join(root, 'packages', dir, pkg.bin?.[dir] ?? '');
        expect(readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
        expect(statSync(bin).mode & 0o111).not.toBe(0);
        expect(existsSync(join(root, 'packages', dir, 'src', 'cli.ts'))).toBe(true);
      }
    }
  });

  it('keeps shared-types free of runtime dependencies', () => {
    const pkg = JSON.parse(read('packages/shared-types/package.json')) as { dependencies?: object };
    expect(pkg.dependencies ?? {}).toEqual({});
    for (const f of readdirSync(join(root, 'packages/shared-types/src'))) {
      expect(read(`packages/shared-types/src/${f}`)).not.toMatch(/from 'node:|from "node:|require\(/);
    }
  });

  it('says what docker/ and deploy/ will hold', () => {
    expect(read('docker/README.md')).toMatch(/^# /);
    expect(read('deploy/README.md')).toMatch(/^# /);
  });
});

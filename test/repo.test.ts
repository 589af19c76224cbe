import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (p: string) => readFileSync(join(root, p), 'utf8');
const packages = readdirSync(join(root, 'packages')).filter((d) => statSync(join(root, 'packages', d)).isDirectory());
const services = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check'];

/** Every file under dir, skipping dependencies, builds, benches, tests and runtime state. */
const walk = (dir: string): string[] =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory())
      return ['node_modules', 'dist', 'bench', 'test', '.git', '.vigil'].includes(e.name) ? [] : walk(p);
    return [p];
  });
/** Lines as `wc -l` counts them: a final newline ends the last line, it opens no new one. */
const lines = (p: string) => read(p).replace(/\n$/, '').split('\n').length;
/** The TypeScript sources of every package. */
const sources = () => packages.flatMap((d) => walk(`packages/${d}/src`)).filter((p) => p.endsWith('.ts'));

/** What a function is called where it stands: its own name, or the variable or property it is assigned to. */
const nameOf = (fn: ts.SignatureDeclaration, sf: ts.SourceFile): string => {
  if (fn.name) return fn.name.getText(sf);
  const at = fn.parent;
  if ((ts.isVariableDeclaration(at) || ts.isPropertyAssignment(at)) && at.name) return at.name.getText(sf);
  return '(anonymous)';
};

/**
 * The functions of a file longer than limit lines, from the compiler's own tree: declarations, methods,
 * accessors, constructors, arrow functions and function expressions, nested ones too. A data table (an
 * object or array literal) is no function, however long; the functions inside it count on their own.
 */
const longFunctions = (p: string, limit: number): string[] => {
  const sf = ts.createSourceFile(p, read(p), ts.ScriptTarget.Latest, true);
  const line = (pos: number) => sf.getLineAndCharacterOfPosition(pos).line;
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const n = line(node.end) - line(node.getStart(sf)) + 1;
      if (n > limit) found.push(`${p}:${line(node.getStart(sf)) + 1} ${nameOf(node, sf)}: ${n} lines`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
};

/** The relative imports and re-exports of a source file (type-only ones too), as repository paths. */
const importsOf = (p: string): string[] => {
  const sf = ts.createSourceFile(p, read(p), ts.ScriptTarget.Latest, false);
  return sf.statements.flatMap((s) => {
    if (!(ts.isImportDeclaration(s) || ts.isExportDeclaration(s)) || !s.moduleSpecifier) return [];
    const spec = (s.moduleSpecifier as ts.StringLiteral).text;
    if (!spec.startsWith('.')) return [];
    const file = posix.join(posix.dirname(p), spec.replace(/\.js$/, '.ts'));
    return [existsSync(join(root, file)) ? file : posix.join(file.replace(/\.ts$/, ''), 'index.ts')];
  });
};

/** Every import circle among files: each strongly connected component of two files or more (Tarjan). */
const circles = (files: string[]): string[][] => {
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const connect = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) connect(w);
      if (stack.includes(w)) low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const part = stack.splice(stack.indexOf(v));
    if (part.length > 1) found.push(part.sort());
  };
  for (const f of files) if (!index.has(f)) connect(f);
  return found;
};

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
    expect(packages.sort()).toEqual(['shared-types', 'stack', ...services].sort());
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
      if (dir === 'stack') expect(Object.keys(pkg.bin ?? {})).toEqual(['vigil']);
    }
  });

  it('keeps shared-types to zod alone: a pure main entry, and a Node entry on built-ins only', () => {
    const pkg = JSON.parse(read('packages/shared-types/package.json')) as { dependencies?: object };
    expect(Object.keys(pkg.dependencies ?? {})).toEqual(['zod']);
    const src = join(root, 'packages/shared-types/src');
    for (const f of readdirSync(src).filter((n) => n.endsWith('.ts'))) {
      expect(read(`packages/shared-types/src/${f}`)).not.toMatch(/from 'node:|from "node:|require\(/);
    }
    for (const f of readdirSync(join(src, 'node'))) {
      const imports = [...read(`packages/shared-types/src/node/${f}`).matchAll(/^import (?!type ).*from '([^']+)'/gm)];
      for (const [, from] of imports) expect(from).toMatch(/^(node:|\.)/);
    }
  });

  it('has no source file over 400 lines, and no untyped JavaScript over 150 lines outside bench/ and tests', () => {
    const over = (limit: number) => (p: string) => (lines(p) > limit ? [`${p}: ${lines(p)} lines`] : []);
    const tooLong = [
      ...sources().flatMap(over(400)),
      ...['packages', 'scripts', 'deploy', 'docker']
        .flatMap((d) => walk(d))
        .filter((p) => /\.(m|c)?js$/.test(p) && !p.includes('/bin/'))
        .flatMap(over(150)),
    ];
    expect(tooLong).toEqual([]);
  });

  it('has no function in packages/*/src over 120 lines (nested ones, methods and arrows included)', () => {
    expect(sources().flatMap((p) => longFunctions(p, 120))).toEqual([]);
  });

  it('has no import circle among the sources of any package (type-only imports included)', () => {
    expect(circles(sources())).toEqual([]);
  });

  it('says what docker/ and deploy/ will hold', () => {
    expect(read('docker/README.md')).toMatch(/^# /);
    expect(read('deploy/README.md')).toMatch(/^# /);
  });
});

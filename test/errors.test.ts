/**
 * The error catalogues (fastify's `FST_ERR_*` test is the model): every package lists its codes
 * once, in `defineErrors({...})` in its `src/errors.ts`. This test checks, per package, that every
 * code its source names is catalogued (a VigilError can only be made from a catalogue entry, so
 * this covers every code it throws), that every catalogued code is used and documented in the
 * package's README, that every JSON-RPC code it answers is catalogued, that every error class is a
 * VigilError, and that `new Error(` is left only where no user meets it (the list below says why).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { GUARDIAN_ERRORS } from '../packages/guardian/src/errors.js';
import { HEALTH_ERRORS } from '../packages/health-check/src/errors.js';
import { INFERENCE_ERRORS } from '../packages/inference-server/src/errors.js';
import { type CataloguedError, VIGIL_ERRORS } from '../packages/shared-types/src/errors.js';
import { RpcErrorCode } from '../packages/shared-types/src/jsonrpc.js';
import { DAEMON_ERRORS } from '../packages/signal-daemon/src/errors.js';
import { STACK_ERRORS } from '../packages/stack/src/errors.js';
import { RELAY_ERRORS } from '../packages/tcp-relay/src/errors.js';

const root = fileURLToPath(new URL('..', import.meta.url));

type Catalogue = Readonly<Record<string, CataloguedError>>;
const PACKAGES: Record<string, { readonly prefix: string; readonly catalogue: Catalogue }> = {
  'shared-types': { prefix: 'VIGIL_ERR_', catalogue: VIGIL_ERRORS },
  guardian: { prefix: 'VIGIL_ERR_GUARDIAN_', catalogue: GUARDIAN_ERRORS },
  'health-check': { prefix: 'VIGIL_ERR_HEALTH_', catalogue: HEALTH_ERRORS },
  'inference-server': { prefix: 'VIGIL_ERR_INFERENCE_', catalogue: INFERENCE_ERRORS },
  'signal-daemon': { prefix: 'VIGIL_ERR_DAEMON_', catalogue: DAEMON_ERRORS },
  'tcp-relay': { prefix: 'VIGIL_ERR_RELAY_', catalogue: RELAY_ERRORS },
  stack: { prefix: 'VIGIL_ERR_STACK_', catalogue: STACK_ERRORS },
};
const AREA_PREFIXES = Object.entries(PACKAGES)
  .filter(([name]) => name !== 'shared-types')
  .map(([, p]) => p.prefix);

/**
 * Where `new Error(` may stay: programming errors (a bug of vigil's own, never a user's input),
 * and errors caught on the spot or turned into a failure's text, which never end a program.
 */
const BARE_ERRORS: readonly { file: string; text: string; why: string }[] = [
  { file: 'shared-types/src/errors.ts', text: 'expected VIGIL_ERR_ and', why: 'a bad catalogue: a bug' },
  { file: 'shared-types/src/prometheus.ts', text: 'written twice', why: 'a metric written twice: a bug' },
  { file: 'shared-types/src/prometheus.ts', text: 'must end in _total', why: 'a badly named counter: a bug' },
  { file: 'shared-types/src/prometheus.ts', text: 'invalid metric name', why: 'a badly named metric: a bug' },
  { file: 'shared-types/src/prometheus.ts', text: 'invalid label name', why: 'a badly named label: a bug' },
  { file: 'shared-types/src/node/options.ts', text: 'no option --', why: 'a table asked for a flag it lacks: a bug' },
  { file: 'shared-types/src/node/ports.ts', text: 'no free port found', why: 'for tests and benchmarks only' },
  { file: 'health-check/src/checks/daemon.ts', text: 'no result.version', why: "becomes the check's detail" },
  { file: 'inference-server/src/engine.ts', text: 'the model is disposed', why: 'used after dispose: a bug' },
  { file: 'inference-server/src/engine.ts', text: 'no sequence', why: 'a slot that does not exist: a bug' },
  { file: 'inference-server/src/engine-step.ts', text: 'the sequence is disposed', why: 'used after dispose: a bug' },
  {
    file: 'inference-server/src/engine-step.ts',
    text: 'Failed to sample next token',
    why: "node-llama-cpp's own error for the same failure",
  },
  {
    file: 'inference-server/src/gguf/vocabulary.ts',
    text: 'cannot build a vocabulary',
    why: 'a built-in shape: a bug',
  },
  { file: 'inference-server/src/server.ts', text: "new Error('stopping')", why: 'the reason a load is aborted' },
  { file: 'signal-daemon/src/localnet/methods.ts', text: 'is defined twice', why: 'a method defined twice: a bug' },
  { file: 'signal-daemon/src/localnet/group-commit.ts', text: 'write failed', why: 'stands for a non-Error thrown' },
  { file: 'signal-daemon/src/sqlite.ts', text: 'stays in journal mode', why: 'SQLITE_BUSY, retried as a busy lock' },
  { file: 'stack/src/control.ts', text: 'not an object', why: 'caught on the spot: a bad request answered' },
  { file: 'stack/src/deploy/render.ts', text: 'unknown placeholder', why: "a template of vigil's own: a bug" },
  { file: 'tcp-relay/src/filter.ts', text: 'not UTF-8', why: 'caught on the spot: an unreadable line' },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** The package's source without comments and without its catalogue's own entries. */
function source(pkg: string): { file: string; text: string }[] {
  return sourceFiles(join(root, 'packages', pkg, 'src')).map((path) => {
    let text = readFileSync(path, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    if (path.endsWith('/src/errors.ts')) text = text.replace(/defineErrors\(\{[\s\S]*?\n\}\);/, '');
    return { file: relative(join(root, 'packages'), path), text };
  });
}

const codesIn = (text: string) => new Set(text.match(/\bVIGIL_ERR_[A-Z0-9_]+\b/g) ?? []);
const RPC_NAMES = RpcErrorCode as Readonly<Record<string, number>>;
/** The JSON-RPC codes a package answers by name (`RpcErrorCode.INVALID_PARAMS`). */
const rpcCodesIn = (text: string) =>
  new Set([...text.matchAll(/\bRpcErrorCode\.([A-Z_]+)\b/g)].map((m) => RPC_NAMES[m[1] ?? ''] as number));

describe.each(Object.keys(PACKAGES))('the error catalogue of %s', (pkg) => {
  const { prefix, catalogue } = PACKAGES[pkg]!;
  const src = source(pkg);
  const all = src.map((f) => f.text).join('\n');
  const shared = pkg === 'shared-types';
  const everywhere = shared ? Object.keys(PACKAGES).flatMap((p) => source(p).map((f) => f.text)) : [all];

  it('names each code under the package prefix, with a meaning and an exit code', () => {
    expect(Object.keys(catalogue).length).toBeGreaterThan(0);
    for (const [code, e] of Object.entries(catalogue)) {
      expect(code.startsWith(prefix)).toBe(true);
      if (shared) expect(AREA_PREFIXES.some((p) => code.startsWith(p))).toBe(false);
      expect(e.code).toBe(code);
      expect(e.message.length).toBeGreaterThan(10);
      expect(Number.isInteger(e.exitCode)).toBe(true);
    }
  });

  it('holds every code the source names, and every JSON-RPC code it answers', () => {
    const known = new Set([...Object.keys(catalogue), ...Object.keys(VIGIL_ERRORS)]);
    expect([...codesIn(all)].filter((c) => !known.has(c))).toEqual([]);
    const answered = new Set(Object.values(catalogue).map((e) => e.rpc));
    expect([...rpcCodesIn(all)].filter((c) => !answered.has(c))).toEqual([]);
  });

  it('holds only codes the source uses', () => {
    const used = codesIn(everywhere.join('\n'));
    const rpcUsed = rpcCodesIn(all);
    const unused = Object.values(catalogue).filter(
      (e) => !used.has(e.code) && !(e.rpc !== undefined && rpcUsed.has(e.rpc)),
    );
    expect(unused.map((e) => e.code)).toEqual([]);
  });

  it('is documented in the README, code by code, with nothing else', () => {
    const readme = readFileSync(join(root, 'packages', pkg, 'README.md'), 'utf8');
    const documented = codesIn(readme);
    expect(Object.keys(catalogue).filter((c) => !documented.has(c))).toEqual([]);
    const known = new Set([...Object.keys(catalogue), ...Object.keys(VIGIL_ERRORS)]);
    expect([...documented].filter((c) => !known.has(c))).toEqual([]);
  });

  it('makes every error class a VigilError and leaves new Error( only where no user meets it', () => {
    for (const { file, text } of src) {
      const classes = [...text.matchAll(/class (\w+) extends Error\b/g)].map((m) => m[1]);
      expect({ file, classes }).toEqual({ file, classes: file === 'shared-types/src/errors.ts' ? ['VigilError'] : [] });
      const bare = text
        .split('\n')
        .filter((line) => line.includes('new Error('))
        .filter((line) => !BARE_ERRORS.some((b) => b.file === file && line.includes(b.text)));
      expect({ file, bare }).toEqual({ file, bare: [] });
    }
  });
});

describe('the list of bare errors allowed', () => {
  it('names only lines that are still there (a line removed or reworded leaves the list)', () => {
    const stale = BARE_ERRORS.filter((b) => {
      const file = join(root, 'packages', b.file);
      return !existsSync(file) || !readFileSync(file, 'utf8').includes(b.text);
    });
    expect(stale).toEqual([]);
  });
});

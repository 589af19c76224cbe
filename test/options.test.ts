/**
 * Every binary's options are one table (defineOptions): each README's flag table lists exactly the
 * flags of its package's tables, so a flag added, renamed or removed in a table and not in the
 * README (or the other way round) fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { GUARDIAN_OPTIONS, GUARDIAN_STATUS_OPTIONS } from '../packages/guardian/src/options.js';
import { HEALTH_CHECK_OPTIONS } from '../packages/health-check/src/options.js';
import {
  CERTS_OPTIONS,
  KEYGEN_OPTIONS,
  MAKE_MODEL_OPTIONS,
  MANIFEST_OPTIONS,
} from '../packages/inference-server/src/cli-options.js';
import { INFERENCE_SERVE_OPTIONS } from '../packages/inference-server/src/options.js';
import type { OptionTable } from '../packages/shared-types/src/node/options.js';
import { SIGNAL_DAEMON_OPTIONS } from '../packages/signal-daemon/src/options.js';
import { STACK_OPTIONS } from '../packages/stack/src/config.js';
import { TCP_RELAY_OPTIONS } from '../packages/tcp-relay/src/options.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** A README part and the tables whose flags its flag tables list. */
interface Documented {
  readonly pkg: string;
  /** The heading of the part (absent: the whole README). */
  readonly section?: string;
  readonly tables: readonly OptionTable[];
}

const DOCUMENTED: readonly Documented[] = [
  { pkg: 'signal-daemon', tables: [SIGNAL_DAEMON_OPTIONS] },
  { pkg: 'tcp-relay', tables: [TCP_RELAY_OPTIONS] },
  { pkg: 'health-check', tables: [HEALTH_CHECK_OPTIONS] },
  { pkg: 'guardian', tables: [GUARDIAN_OPTIONS, GUARDIAN_STATUS_OPTIONS] },
  { pkg: 'inference-server', section: 'serve', tables: [INFERENCE_SERVE_OPTIONS] },
  { pkg: 'inference-server', section: 'make-model', tables: [MAKE_MODEL_OPTIONS] },
  { pkg: 'inference-server', section: 'certs', tables: [CERTS_OPTIONS] },
  { pkg: 'inference-server', section: 'manifest', tables: [MANIFEST_OPTIONS] },
  { pkg: 'inference-server', section: 'keygen', tables: [KEYGEN_OPTIONS] },
  { pkg: 'stack', section: '`vigil start`', tables: [STACK_OPTIONS] },
];

/** Flags every binary has from commander, not from a table. */
const BUILT_IN = new Set(['--version', '--help']);

/** The part of a README under `heading` (to the next heading of the same or a higher level). */
function sectionOf(readme: string, heading: string | undefined): string {
  if (heading === undefined) return readme;
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => /^#+ /.test(l) && l.replace(/^#+ /, '') === heading);
  if (start < 0) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

/** The long flags in the first column of every table whose header's first cell is `flag`. */
function readmeFlags(text: string): Set<string> {
  const flags = new Set<string>();
  let inFlagTable = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) {
      inFlagTable = false;
      continue;
    }
    const first = line.split('|')[1]?.trim() ?? '';
    if (/^flag$/i.test(first)) inFlagTable = true;
    else if (inFlagTable) for (const m of first.matchAll(/--[a-z0-9][a-z0-9-]*/g)) flags.add(m[0]);
  }
  for (const f of BUILT_IN) flags.delete(f);
  return flags;
}

/** What differs between a README part and its tables: flags missing from it, and flags it has that no table has. */
function flagProblems(text: string, tables: readonly OptionTable[]): { missing: string[]; unknown: string[] } {
  const declared = new Set(tables.flatMap((t) => Object.keys(t.specs).map((name) => `--${name}`)));
  const documented = readmeFlags(text);
  return {
    missing: [...declared].filter((f) => !documented.has(f)).sort(),
    unknown: [...documented].filter((f) => !declared.has(f)).sort(),
  };
}

const readmeOf = (d: Documented) =>
  sectionOf(readFileSync(join(root, 'packages', d.pkg, 'README.md'), 'utf8'), d.section);

describe("each package README's flag table and its option tables", () => {
  it.each(DOCUMENTED.map((d) => [`${d.pkg}${d.section ? ` (${d.section})` : ''}`, d] as const))(
    '%s: every option is in the README, and the README has no other flag',
    (_name, d) => {
      expect(flagProblems(readmeOf(d), d.tables)).toEqual({ missing: [], unknown: [] });
    },
  );

  it('fails when a README row is removed, or a row names a flag no table has', () => {
    const d = DOCUMENTED[0]!;
    const text = readmeOf(d);
    const row = text.split('\n').find((l) => l.startsWith('| `--hold-hours'));
    expect(row).toBeDefined();
    expect(flagProblems(text.replace(`${row}\n`, ''), d.tables).missing).toEqual(['--hold-hours']);
    const extra = text.replace(`${row}\n`, `${row}\n| \`--hold-days <n>\` | | | |\n`);
    expect(flagProblems(extra, d.tables).unknown).toEqual(['--hold-days']);
  });
});

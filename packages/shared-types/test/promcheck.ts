/**
 * Checks Prometheus text as a scraper reads it, for the tests of every package that writes
 * metrics: a line-by-line reading of the exposition format (always), and `promtool check metrics`
 * when the promtool binary is on PATH (Debian: `apt-get install prometheus`).
 */
import { spawnSync } from 'node:child_process';

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const SAMPLE = new RegExp(
  `^(${NAME})(?:\\{(${LABEL}(?:,${LABEL})*)?,?\\})? (NaN|[+-]Inf|-?[0-9.]+(?:e[+-]?[0-9]+)?)(?: -?[0-9]+)?$`,
);
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);

export interface ParsedSample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Parses exposition text; throws naming the first line that breaks the format. */
export function parseExposition(text: string): { samples: ParsedSample[]; types: Record<string, string> } {
  if (text !== '' && !text.endsWith('\n')) throw new Error('the exposition must end with a newline');
  const types: Record<string, string> = {};
  const helped = new Set<string>();
  const samples: ParsedSample[] = [];
  const seen = new Set<string>();
  const lines = text.split('\n').slice(0, -1);
  for (const [i, line] of lines.entries()) {
    const at = `line ${i + 1} "${line}"`;
    let m = HELP.exec(line);
    if (m) {
      if (helped.has(m[1]!)) throw new Error(`${at}: a second HELP`);
      helped.add(m[1]!);
      continue;
    }
    m = TYPE.exec(line);
    if (m) {
      if (types[m[1]!]) throw new Error(`${at}: a second TYPE`);
      if (samples.some((s) => s.name === m![1])) throw new Error(`${at}: TYPE after samples`);
      types[m[1]!] = m[2]!;
      continue;
    }
    if (line.startsWith('#')) continue;
    m = SAMPLE.exec(line);
    if (!m) throw new Error(`${at}: not a sample`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    const key = `${m[1]}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) throw new Error(`${at}: a series written twice`);
    seen.add(key);
    const v = m[3]!;
    samples.push({
      name: m[1]!,
      labels,
      value: v === 'NaN' ? Number.NaN : v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v),
    });
  }
  return { samples, types };
}

/** The value of one series (labels given must all match), or undefined. */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  return parseExposition(text).samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  )?.value;
}

export const PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;

/**
 * Checks the text with the format reader, then with `promtool check metrics` when promtool is
 * installed (its lint included); throws with promtool's words.
 */
export function checkMetrics(text: string): void {
  parseExposition(text);
  if (!PROMTOOL) return;
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`promtool check metrics failed:\n${r.stdout}${r.stderr}\n---\n${text}`);
}

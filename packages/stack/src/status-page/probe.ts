/**
 * What the status page reads of the services' answers (asked with the clients of
 * `@vigil/shared-types/node`): Prometheus text read into sums by name, and rates from a counter's
 * recent samples.
 */
export interface MetricLine {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** The samples of Prometheus text (comments skipped; a line that is not a sample is ignored). */
export function parseMetrics(text: string): MetricLine[] {
  const out: MetricLine[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (Number.isNaN(value)) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value });
  }
  return out;
}

/** The sum of a metric's samples (those whose labels pass `where`), null when it has none. */
export function metricSum(
  lines: readonly MetricLine[],
  name: string,
  where: (labels: Readonly<Record<string, string>>) => boolean = () => true,
): number | null {
  let sum: number | null = null;
  for (const l of lines) if (l.name === name && where(l.labels)) sum = (sum ?? 0) + l.value;
  return sum;
}

/** A counter's rate per second over its samples of the last `windowMs`; a counter that went back (a restart) starts again. */
export class Rate {
  private samples: { at: number; value: number }[] = [];

  constructor(private readonly windowMs: number) {}

  add(at: number, value: number | null): void {
    if (value === null) return;
    if ((this.samples.at(-1)?.value ?? 0) > value) this.samples = [];
    this.samples.push({ at, value });
    while (this.samples.length > 2 && this.samples[0]!.at < at - this.windowMs) this.samples.shift();
  }

  /** Per second; null until two samples a second apart exist. */
  perSecond(): number | null {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.at - first.at < 1000) return null;
    return ((last.value - first.value) * 1000) / (last.at - first.at);
  }
}

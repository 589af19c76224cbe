/**
 * The Prometheus text exposition format (version 0.0.4), written once for every vigil service
 * that exports metrics: the daemon's metrics listener, the guardian's textfile for node_exporter,
 * the inference server's `/metrics`. Pure: families in, text out.
 *
 * A family is written as `# HELP`, `# TYPE`, then its samples; names and label names are checked
 * (a bad one is a programming error and throws), help text and label values are escaped as the
 * format requires, and a counter's name must end in `_total` (promtool's lint).
 */

export type MetricType = 'counter' | 'gauge';

export interface MetricSample {
  readonly labels?: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface MetricFamily {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly samples: readonly MetricSample[];
}

/** The media type a scrape answer carries. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

const escapeHelp = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
const escapeLabel = (s: string) => s.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

/** A sample value as the format writes it: `NaN`, `+Inf`, `-Inf`, or the number. */
export function formatMetricValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Number.POSITIVE_INFINITY) return '+Inf';
  if (v === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(v);
}

function labelText(labels: Readonly<Record<string, string>> | undefined, family: string): string {
  if (!labels) return '';
  const keys = Object.keys(labels).sort();
  if (keys.length === 0) return '';
  for (const k of keys) {
    if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new Error(`metric ${family}: invalid label name "${k}"`);
  }
  return `{${keys.map((k) => `${k}="${escapeLabel(labels[k]!)}"`).join(',')}}`;
}

/** Writes the families as Prometheus text (a family without samples keeps its HELP and TYPE). */
export function renderMetrics(families: readonly MetricFamily[]): string {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const f of families) {
    if (!METRIC_NAME.test(f.name)) throw new Error(`invalid metric name "${f.name}"`);
    if (seen.has(f.name)) throw new Error(`metric ${f.name} written twice`);
    if (f.type === 'counter' && !f.name.endsWith('_total')) throw new Error(`counter ${f.name} must end in _total`);
    seen.add(f.name);
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    const series = new Set<string>();
    for (const s of f.samples) {
      const labels = labelText(s.labels, f.name);
      if (series.has(labels)) throw new Error(`metric ${f.name}${labels} written twice`);
      series.add(labels);
      out.push(`${f.name}${labels} ${formatMetricValue(s.value)}`);
    }
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

/** The key of one label set (a loop: cheaper than `join` for the few labels of a series). */
function seriesKey(values: readonly string[]): string {
  let key = values[0] ?? '';
  for (let i = 1; i < values.length; i++) key += `\u0000${values[i]}`;
  return key;
}

/**
 * Counts by a fixed set of labels (e.g. method and outcome), bounded: once `maxSeries` distinct
 * label sets exist, new ones are counted under `overflow` for every label, so a client cannot
 * grow the exposition without bound.
 */
export class LabelledCounter {
  private readonly counts = new Map<string, { labels: Record<string, string>; value: number }>();

  constructor(
    readonly labelNames: readonly string[],
    readonly maxSeries = 500,
    readonly overflow = 'other',
  ) {}

  inc(values: readonly string[], by = 1): void {
    this.series(values).value += by;
  }

  /**
   * The series of one label set, created at 0 when new (under `overflow` once `maxSeries` exist):
   * a caller that counts one label set often may keep it and add to `value` directly.
   */
  series(values: readonly string[]): { value: number } {
    const entry = this.counts.get(seriesKey(values));
    if (entry) return entry;
    if (this.counts.size >= this.maxSeries) values = this.labelNames.map(() => this.overflow);
    const key = seriesKey(values);
    let created = this.counts.get(key);
    if (!created) {
      created = { labels: Object.fromEntries(this.labelNames.map((n, i) => [n, values[i] ?? ''])), value: 0 };
      this.counts.set(key, created);
    }
    return created;
  }

  get(values: readonly string[]): number {
    return this.counts.get(seriesKey(values))?.value ?? 0;
  }

  samples(): MetricSample[] {
    return [...this.counts.values()].map((e) => ({ labels: e.labels, value: e.value }));
  }
}

/**
 * The guardian's history as inline SVG: the heartbeat bars (one mark per probe in the last hour;
 * 15-minute buckets over 24 h) and the probe-latency chart with restarts and fallbacks marked.
 * Kinds differ in shape (height, outline) as well as colour, and every mark has a title.
 */
import type { GuardianHistory, Mark, Probe, ProbeKind } from './history.js';

export const esc = (s: unknown): string => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const W = 720;
const H = 28;
/** Height of each kind's mark: a failure is a full bar, ok most of one, busy and loading short. */
const HEIGHT: Readonly<Record<ProbeKind, number>> = { failed: H, ok: H - 8, busy: H / 2, loading: H / 2 };
const RANK: Readonly<Record<ProbeKind, number>> = { ok: 0, busy: 1, loading: 2, failed: 3 };
const clock = (ts: number) => new Date(ts * 1000).toISOString().slice(11, 19);

const counts = (probes: readonly Probe[]) => {
  const c: Record<ProbeKind, number> = { ok: 0, failed: 0, busy: 0, loading: 0 };
  for (const p of probes) c[p.kind]++;
  return c;
};

const countText = (c: Record<ProbeKind, number>) =>
  (Object.keys(c) as ProbeKind[])
    .filter((k) => c[k] > 0)
    .map((k) => `${c[k]} ${k}`)
    .join(', ') || 'no probes';

/** The last hour: one mark per probe, placed by its time. */
export function hourBar(history: GuardianHistory, now: number): string {
  const from = now - 3600;
  const probes = history.since(from);
  const marks = probes.map((p) => {
    const x = Math.max(0, Math.min(W - 2, ((p.ts - from) / 3600) * W)).toFixed(1);
    const h = HEIGHT[p.kind];
    const what = `${clock(p.ts)} ${p.kind}${p.ms === null ? '' : ` ${Math.round(p.ms)} ms`}`;
    return `<rect class="probe ${p.kind}" x="${x}" y="${H - h}" width="2" height="${h}"><title>${what}</title></rect>`;
  });
  const summary = `Probes in the last hour: ${countText(counts(probes))}`;
  return `<figure class="bar"><svg role="img" aria-label="${esc(summary)}" viewBox="0 0 ${W} ${H}" width="100%" height="${H}" preserveAspectRatio="none" id="hour-bar">${marks.join('')}</svg><figcaption>${esc(summary)} (one mark per probe; failed: full height, ok: tall, busy or loading: short)</figcaption></figure>`;
}

const BUCKETS = 96;

/** The last 24 h in 15-minute buckets, each as its worst probe, with its counts in its title. */
export function dayBar(history: GuardianHistory, now: number): string {
  const from = now - 86_400;
  const size = 86_400 / BUCKETS;
  const buckets: Probe[][] = Array.from({ length: BUCKETS }, () => []);
  const probes = history.since(from);
  for (const p of probes) buckets[Math.min(BUCKETS - 1, Math.floor((p.ts - from) / size))]!.push(p);
  const w = W / BUCKETS;
  const rects = buckets.map((b, i) => {
    if (b.length === 0) return '';
    const worst = b.reduce<ProbeKind>((k, p) => (RANK[p.kind] > RANK[k] ? p.kind : k), 'ok');
    const h = HEIGHT[worst];
    const t = from + i * size;
    return `<rect class="probe ${worst}" x="${(i * w).toFixed(1)}" y="${H - h}" width="${(w - 1).toFixed(1)}" height="${h}"><title>${clock(t)}–${clock(t + size)}: ${countText(counts(b))}</title></rect>`;
  });
  const summary = `Probes in the last 24 hours: ${countText(counts(probes))}`;
  return `<figure class="bar"><svg role="img" aria-label="${esc(summary)}" viewBox="0 0 ${W} ${H}" width="100%" height="${H}" preserveAspectRatio="none" id="day-bar">${rects.join('')}</svg><figcaption>${esc(summary)} (15-minute blocks, each shown as its worst probe)</figcaption></figure>`;
}

const CH = 120;
const POINTS = 288;
const MARK_STYLE: Readonly<Record<string, string>> = {
  restarting: 'restart',
  fallback_activated: 'fallback',
  restored: 'restored',
};

function percentile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** Probe latency over 24 h (the slowest probe of each 5 minutes), restarts and fallbacks as lines. */
export function latencyChart(history: GuardianHistory, now: number): string {
  const from = now - 86_400;
  const size = 86_400 / POINTS;
  const max: (number | null)[] = new Array(POINTS).fill(null);
  const all: number[] = [];
  for (const p of history.since(from)) {
    if (p.ms === null || p.kind === 'busy') continue;
    const i = Math.min(POINTS - 1, Math.floor((p.ts - from) / size));
    max[i] = Math.max(max[i] ?? 0, p.ms);
    all.push(p.ms);
  }
  all.sort((a, b) => a - b);
  const top = Math.max(10, percentile(all, 1)) * 1.1;
  // Each 5 minutes is a step across its width, so that a lone point is seen too.
  const x = (i: number) => (i * (W / POINTS)).toFixed(1);
  const y = (ms: number) => (CH - (ms / top) * (CH - 4)).toFixed(1);
  const segments: string[] = [];
  let run: string[] = [];
  max.forEach((v, i) => {
    if (v === null) {
      if (run.length) segments.push(run.join(' '));
      run = [];
    } else run.push(`${x(i)},${y(v)} ${x(i + 1)},${y(v)}`);
  });
  if (run.length) segments.push(run.join(' '));
  const lines = segments.map((s) => `<polyline class="latency" points="${s}"/>`);
  const marks = history.marks.filter((m: Mark) => m.ts >= from && MARK_STYLE[m.event]);
  const markLines = marks.map((m) => {
    const mx = (((m.ts - from) / 86_400) * W).toFixed(1);
    return `<line class="mark ${MARK_STYLE[m.event]}" x1="${mx}" x2="${mx}" y1="0" y2="${CH}"><title>${clock(m.ts)} ${m.event}</title></line>`;
  });
  const stats = all.length
    ? `median ${Math.round(percentile(all, 0.5))} ms, 95th percentile ${Math.round(percentile(all, 0.95))} ms, slowest ${Math.round(percentile(all, 1))} ms over ${all.length} probes`
    : 'no probe latency in the last 24 hours';
  const kinds = Object.entries(MARK_STYLE)
    .map(([event, cls]) => `${marks.filter((m) => m.event === event).length} ${cls}`)
    .join(', ');
  return `<figure class="chart"><svg role="img" aria-label="Probe latency, last 24 hours: ${esc(stats)}" viewBox="0 0 ${W} ${CH}" width="100%" height="${CH}" preserveAspectRatio="none" id="latency">${lines.join('')}${markLines.join('')}<text x="4" y="12" class="axis">${Math.round(top)} ms</text></svg><figcaption>Probe latency, slowest of each 5 minutes: ${esc(stats)}. Marked: ${kinds} (restart: solid line, fallback: dashed, restored: dotted).</figcaption></figure>`;
}

/**
 * `GET /metrics`: the server's counters, histograms and gauges in Prometheus' text format
 * (version 0.0.4). A small writer of its own, kept apart so that a shared one can replace it.
 * Label values are bounded: routes are the known paths (anything else is `other`), statuses the
 * HTTP codes sent.
 */
import { INFERENCE_PATHS } from '@vigil/shared-types';
import type { ProgressReport } from './progress.js';

export const METRICS_PATH = '/metrics';
export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Seconds; time to first token and request duration. */
const TTFT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly buckets: readonly number[]) {
    this.counts = buckets.map(() => 0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) this.counts[i]!++;
  }
}

/** A label value escaped as the format asks (backslash, double quote, newline). */
const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
const labels = (l: Record<string, string>) => {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${esc(v)}"`);
  return parts.length > 0 ? `{${parts.join(',')}}` : '';
};
const num = (v: number) => (Number.isFinite(v) ? String(v) : v > 0 ? '+Inf' : v < 0 ? '-Inf' : 'NaN');

/** The route label of a path: one of the served paths, or `other`. */
export function routeOf(path: string): string {
  if (path === INFERENCE_PATHS.models) return path;
  if (path.startsWith(`${INFERENCE_PATHS.models}/`)) return `${INFERENCE_PATHS.models}/{id}`;
  if (path === METRICS_PATH || (Object.values(INFERENCE_PATHS) as string[]).includes(path)) return path;
  return 'other';
}

/** What the gauges read at scrape time. */
export interface MetricsGauges {
  readonly state: string;
  readonly queued: number;
  readonly busy: number;
  readonly sequences: number;
  /** The saved-state cache; null: off (or no model yet). */
  readonly stateCache?: {
    readonly total: number;
    readonly size: number;
    readonly maxBytes: number;
    readonly saves: number;
    readonly evictions: number;
  } | null;
  /** Progress of the completions under way; absent: the four progress gauges are left out. */
  readonly progress?: ProgressReport;
  /** Steps of plain answers taken straight to the addon context (engine-step.ts). */
  readonly directSteps?: number;
}

export const MODEL_STATES = ['loading', 'ready', 'failed', 'stopping', 'stopped'] as const;

export class Metrics {
  private readonly requests = new Map<string, { route: string; status: string; listener: string; n: number }>();
  private readonly durations = new Map<string, Histogram>();
  private readonly ttft = new Histogram(TTFT_BUCKETS);
  promptTokens = 0;
  completionTokens = 0;
  /** Prompt tokens reused from a slot's state (restored ones included), and evaluated. */
  cachedTokens = 0;
  evaluatedTokens = 0;
  /** Completions whose prompt reused a prefix (`hit`) or was evaluated whole (`miss`). */
  slotHits = 0;
  slotMisses = 0;
  /** Completions whose prefix a saved state brought back, and those tokens. */
  restores = 0;
  restoredTokens = 0;

  /** One request answered (any route, any status). */
  request(path: string, status: number, listener: string, seconds: number): void {
    const route = routeOf(path);
    const key = `${route}\0${status}\0${listener}`;
    const r = this.requests.get(key);
    if (r) r.n++;
    else this.requests.set(key, { route, status: String(status), listener, n: 1 });
    let h = this.durations.get(route);
    if (!h) {
      h = new Histogram(DURATION_BUCKETS);
      this.durations.set(route, h);
    }
    h.observe(seconds);
  }

  tokens(prompt: number, completion: number): void {
    this.promptTokens += prompt;
    this.completionTokens += completion;
  }

  /** A completion's prompt: `cached` of its `tokens` reused (`restored` of them from a saved state). */
  prompt(tokens: number, cached: number, restored: number): void {
    this.cachedTokens += cached;
    this.evaluatedTokens += tokens - cached;
    if (cached > 0) this.slotHits++;
    else this.slotMisses++;
    if (restored > 0) {
      this.restores++;
      this.restoredTokens += restored;
    }
  }

  firstToken(seconds: number): void {
    this.ttft.observe(seconds);
  }

  /** Prompt-prefix reuse: tokens, slot hits and misses, the saved-state cache. */
  private renderPrefix(
    head: (name: string, type: string, help: string) => void,
    out: string[],
    g: MetricsGauges,
  ): void {
    head('inference_prompt_tokens_cached_total', 'counter', 'Prompt tokens reused from a slot (not evaluated again).');
    out.push(`inference_prompt_tokens_cached_total ${this.cachedTokens}`);
    head('inference_prompt_tokens_evaluated_total', 'counter', 'Prompt tokens evaluated.');
    out.push(`inference_prompt_tokens_evaluated_total ${this.evaluatedTokens}`);
    head(
      'inference_slot_prefix_total',
      'counter',
      'Completions whose prompt reused a cached prefix (hit) or not (miss).',
    );
    out.push(`inference_slot_prefix_total${labels({ result: 'hit' })} ${this.slotHits}`);
    out.push(`inference_slot_prefix_total${labels({ result: 'miss' })} ${this.slotMisses}`);
    head('inference_state_restores_total', 'counter', 'Completions whose prefix a saved state brought back.');
    out.push(`inference_state_restores_total ${this.restores}`);
    head('inference_state_restored_tokens_total', 'counter', 'Prompt tokens brought back from saved states.');
    out.push(`inference_state_restored_tokens_total ${this.restoredTokens}`);
    const c = g.stateCache;
    head('inference_state_cache_bytes', 'gauge', 'Bytes of saved states (bounded by --state-cache-mib).');
    out.push(`inference_state_cache_bytes ${c?.total ?? 0}`);
    head('inference_state_cache_limit_bytes', 'gauge', 'The bound of the saved-state cache (0: off).');
    out.push(`inference_state_cache_limit_bytes ${c?.maxBytes ?? 0}`);
    head('inference_state_cache_entries', 'gauge', 'Saved states held.');
    out.push(`inference_state_cache_entries ${c?.size ?? 0}`);
    head('inference_state_saves_total', 'counter', 'Slot states saved before being overwritten.');
    out.push(`inference_state_saves_total ${c?.saves ?? 0}`);
    head('inference_state_evictions_total', 'counter', 'Saved states dropped to stay within the bound.');
    out.push(`inference_state_evictions_total ${c?.evictions ?? 0}`);
    head(
      'inference_direct_steps_total',
      'counter',
      'Generation steps of plain answers taken straight to the model, alone on it (not batched).',
    );
    out.push(`inference_direct_steps_total ${g.directSteps ?? 0}`);
  }

  /** The exposition text. */
  render(g: MetricsGauges): string {
    const out: string[] = [];
    const head = (name: string, type: string, help: string) =>
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    const histogram = (name: string, h: Histogram, l: Record<string, string>) => {
      h.buckets.forEach((b, i) => {
        out.push(`${name}_bucket${labels({ ...l, le: num(b) })} ${h.counts[i]}`);
      });
      out.push(`${name}_bucket${labels({ ...l, le: '+Inf' })} ${h.count}`);
      out.push(`${name}_sum${labels(l)} ${num(h.sum)}`, `${name}_count${labels(l)} ${h.count}`);
    };
    head('inference_requests_total', 'counter', 'HTTP requests answered, by route, status and listener.');
    for (const r of this.requests.values()) {
      out.push(`inference_requests_total${labels({ route: r.route, status: r.status, listener: r.listener })} ${r.n}`);
    }
    head(
      'inference_request_duration_seconds',
      'histogram',
      "Time from a request to the end of its reply (a stream's whole length), by route.",
    );
    for (const [route, h] of this.durations) histogram('inference_request_duration_seconds', h, { route });
    head(
      'inference_time_to_first_token_seconds',
      'histogram',
      'Time from a completion request to its first generated token (queueing and the prompt included).',
    );
    histogram('inference_time_to_first_token_seconds', this.ttft, {});
    head('inference_prompt_tokens_total', 'counter', 'Prompt tokens of completed completions.');
    out.push(`inference_prompt_tokens_total ${this.promptTokens}`);
    head('inference_completion_tokens_total', 'counter', 'Tokens generated, all choices of every completion.');
    out.push(`inference_completion_tokens_total ${this.completionTokens}`);
    this.renderPrefix(head, out, g);
    head('inference_queue_depth', 'gauge', 'Completions waiting for a free sequence.');
    out.push(`inference_queue_depth ${g.queued}`);
    head('inference_busy_sequences', 'gauge', 'Context sequences generating now.');
    out.push(`inference_busy_sequences ${g.busy}`);
    head('inference_sequences', 'gauge', 'Context sequences (--parallel).');
    out.push(`inference_sequences ${g.sequences}`);
    const p = g.progress;
    if (p) {
      head('inference_in_flight_completions', 'gauge', 'Sequences with a completion under way.');
      out.push(`inference_in_flight_completions ${p.in_flight}`);
      head('inference_oldest_completion_age_seconds', 'gauge', 'Age of the oldest completion under way; 0 when none.');
      out.push(`inference_oldest_completion_age_seconds ${p.oldest_age_s}`);
      head(
        'inference_seconds_since_progress',
        'gauge',
        'Seconds since a sequence last made progress; 0 when none works.',
      );
      out.push(`inference_seconds_since_progress ${p.since_progress_s ?? 0}`);
      head('inference_stalled_sequences', 'gauge', 'Sequences with work and no progress past their bound.');
      out.push(`inference_stalled_sequences ${p.stalled}`);
      head(
        'inference_waiting_for_cpu',
        'gauge',
        "1 while the model's SCHED_IDLE threads wait for CPUs other processes hold (not a stall).",
      );
      out.push(`inference_waiting_for_cpu ${p.waiting_for_cpu ? 1 : 0}`);
    }
    head('inference_model_loaded', 'gauge', '1 when the model is loaded and completions can be served, else 0.');
    out.push(`inference_model_loaded ${g.state === 'ready' ? 1 : 0}`);
    head('inference_model_state', 'gauge', "The server's state: 1 for the current one.");
    for (const s of MODEL_STATES) out.push(`inference_model_state${labels({ state: s })} ${g.state === s ? 1 : 0}`);
    return `${out.join('\n')}\n`;
  }
}

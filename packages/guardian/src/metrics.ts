/**
 * The guardian's Prometheus textfile (`metricsFile`), for node_exporter's textfile collector:
 * rewritten atomically (0644) after every tick and every operator command, from the state file
 * (the counters live there, so that they keep counting across `guardian tick` processes and
 * restarts) and the lock file.
 */
import { type MetricFamily, type MetricSample, renderMetrics } from '@vigil/shared-types';
import { writeFileAtomic } from '@vigil/shared-types/node';
import type { GuardianConfig } from './config.js';
import type { StateFileData } from './state-file.js';

/** The counter of an alert's outcome in the state file: `alert:<channel>:<sent|failed>`. */
export const alertCounter = (channel: 'message' | 'webhook', ok: boolean) =>
  `alert:${channel}:${ok ? 'sent' : 'failed'}`;

/** Probe events: [probe, outcome]. */
const PROBES: Readonly<Record<string, readonly [string, string]>> = {
  probe_ok: ['chat', 'ok'],
  probe_fail: ['chat', 'fail'],
  probe_loading: ['chat', 'loading'],
  probe_waiting_cpu: ['chat', 'waiting_cpu'],
  probe_skip_busy: ['chat', 'skipped_busy'],
  model_list_ok: ['models', 'ok'],
  model_list_fail: ['models', 'fail'],
  canary_ok: ['canary', 'ok'],
  canary_fail: ['canary', 'fail'],
};

const gauge = (name: string, help: string, samples: MetricSample[]): MetricFamily => ({
  name,
  help,
  type: 'gauge',
  samples,
});
const counter = (name: string, help: string, samples: MetricSample[]): MetricFamily => ({
  name,
  help,
  type: 'counter',
  samples,
});
const one = (value: number | null | undefined): MetricSample[] => (value == null ? [] : [{ value }]);

/** The exposition of the state as it is now. */
export function guardianMetrics(
  data: StateFileData,
  config: GuardianConfig,
  fallbackActive: boolean,
  now: number,
): string {
  const c = data.counters;
  const n = (key: string) => c[key] ?? 0;
  const m = data.machine;
  const events = Object.entries(c)
    .filter(([k]) => !k.includes(':'))
    .sort(([a], [b]) => a.localeCompare(b));
  const probes = Object.entries(PROBES).map(([event, [probe, outcome]]) => ({
    labels: { probe, outcome },
    value: n(event),
  }));
  const alerts = (['message', 'webhook'] as const).flatMap((channel) =>
    [true, false].map((ok) => ({
      labels: { channel, outcome: ok ? 'sent' : 'failed' },
      value: n(alertCounter(channel, ok)),
    })),
  );
  return renderMetrics([
    counter('vigil_guardian_probes_total', 'Probes of the active inference backend, by probe and outcome.', probes),
    counter(
      'vigil_guardian_restarts_total',
      'Forced restarts requested through the service manager.',
      one(n('restart_requested')),
    ),
    counter(
      'vigil_guardian_fallbacks_total',
      'Fallback activations after a fatal pattern in the primary log.',
      one(n('fallback_activated')),
    ),
    counter(
      'vigil_guardian_alerts_total',
      'Alerts, by channel (message through the daemon, webhook) and outcome.',
      alerts,
    ),
    counter(
      'vigil_guardian_events_total',
      'Events written to the guardian log, by event.',
      events.map(([event, value]) => ({ labels: { event }, value })),
    ),
    gauge(
      'vigil_guardian_alerting',
      '1 while a person is needed (rate_limit, circuit_open, fallback_unavailable, fallback_failed).',
      [{ value: m.alerting ? 1 : 0 }],
    ),
    gauge(
      'vigil_guardian_alerting_info',
      'The reason a person is needed (present only while alerting).',
      m.alerting ? [{ labels: { reason: m.alerting.reason }, value: 1 }] : [],
    ),
    gauge('vigil_guardian_alerting_since_timestamp_seconds', 'When the alerting state began.', one(m.alerting?.since)),
    gauge('vigil_guardian_fallback_active', '1 while the fallback backend serves (the lock file is present).', [
      { value: fallbackActive ? 1 : 0 },
    ]),
    gauge('vigil_guardian_consecutive_failures', 'Consecutive failed ticks of the active backend.', [
      { value: m.consecutive },
    ]),
    gauge('vigil_guardian_restarts_in_window', `Restarts inside the rate-limit window (${config.restartWindowS} s).`, [
      { value: m.restarts.filter((t) => now - t < config.restartWindowS).length },
    ]),
    gauge('vigil_guardian_restart_limit', 'Restarts allowed inside the window.', [{ value: config.maxRestarts }]),
    gauge('vigil_guardian_binary_missing', '1 when the last integrity check found no primary binary.', [
      { value: m.binaryMissing ? 1 : 0 },
    ]),
    gauge(
      'vigil_guardian_last_probe_timestamp_seconds',
      'When the active backend was last probed.',
      one(m.lastProbeAt),
    ),
    gauge(
      'vigil_guardian_last_success_timestamp_seconds',
      'When a probe of the active backend last succeeded.',
      one(m.lastOkAt),
    ),
    gauge('vigil_guardian_updated_timestamp_seconds', 'When this file was written.', [
      { value: Math.round(now * 1000) / 1000 },
    ]),
  ]);
}

/**
 * Writes the textfile when configured; a failure is one line on stderr per episode (a full disk
 * says so once, not every tick), and changes nothing else.
 */
export class MetricsWriter {
  private failing = false;

  constructor(
    private readonly config: GuardianConfig,
    private readonly say: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  ) {}

  write(data: StateFileData, fallbackActive: boolean): void {
    const file = this.config.metricsFile;
    if (!file) return;
    try {
      const text = guardianMetrics(data, this.config, fallbackActive, Date.now() / 1000);
      writeFileAtomic(file, text, { mode: 0o644, dirMode: 0o755 });
      if (this.failing) this.say(`guardian: the metrics file ${file} is written again`);
      this.failing = false;
    } catch (err) {
      if (!this.failing) this.say(`guardian: cannot write the metrics file ${file}: ${(err as Error).message}`);
      this.failing = true;
    }
  }
}

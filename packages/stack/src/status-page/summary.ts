/** `GET /api/status`: the page's facts as one small JSON object (for scripts and tests). */
import type { Snapshot } from './collect.js';
import { metricSum } from './probe.js';

export function summary(s: Snapshot) {
  const now = s.at / 1000;
  const g = s.guardian;
  const hour = g.history.since(now - 3600);
  return {
    at: new Date(s.at).toISOString(),
    managedBy: s.services.by,
    services: 'list' in s.services ? s.services.list : null,
    servicesError: 'error' in s.services ? s.services.error : null,
    guardian: {
      mode: g.machine?.mode ?? (g.history.fallback ? 'fallback' : 'primary'),
      consecutive: g.machine?.consecutive ?? g.history.consecutive,
      alerting: g.machine?.alerting ?? null,
      probesLastHour: hour.length,
      events: Object.fromEntries(g.history.counts),
    },
    health: { runs: s.health.total, last: s.health.runs.at(-1) ?? null },
    messaging: {
      check: s.messaging.check,
      error: s.messaging.error,
      sentPerMin: s.messaging.sentPerMin,
      receivedPerMin: s.messaging.receivedPerMin,
    },
    inference: {
      error: s.inference.error,
      requestsPerS: s.inference.requestsPerS,
      tokensPerS: s.inference.tokensPerS,
      queueDepth: s.inference.metrics ? metricSum(s.inference.metrics, 'inference_queue_depth') : null,
      busy: s.inference.metrics ? metricSum(s.inference.metrics, 'inference_busy_sequences') : null,
    },
  };
}

/**
 * `--metrics HOST:PORT`: Prometheus text on a listener of its own (off by default), so that the
 * JSON-RPC listener keeps answering 404 for every path but the spec's three. Counters are kept
 * in memory (they start again at 0 with the process, as Prometheus expects of a counter); the
 * gauges are read at each scrape.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  type DaemonStatus,
  hostAllowed,
  LabelledCounter,
  type Logger,
  type MetricFamily,
  type MetricSample,
  PROMETHEUS_CONTENT_TYPE,
  RpcErrorCode,
  renderMetrics,
} from '@vigil/shared-types';
import { RpcFailure } from './errors.js';
import { type Invoke, settle } from './rpc.js';

/** The path of the metrics; every other path is 404. */
export const METRICS_PATH = '/metrics';

/** The outcome label of a call: `ok`, or the name of its JSON-RPC error. */
const OUTCOME: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(RpcErrorCode).map(([name, code]) => [code, name.toLowerCase()]),
);

export interface DaemonGauges {
  readonly status: DaemonStatus;
  /** Messages kept in the inbox for replay. */
  readonly inboxSize: number;
  /** The sequence number of the newest message in the inbox. */
  readonly inboxHead: number;
  /** Bytes of message JSON kept in the inbox. */
  readonly inboxBytes: number;
}

const BACKEND_STATES = ['serving', 'starting', 'down'] as const;

export class DaemonMetrics {
  /** Calls by method, transport and outcome; a method the daemon does not know is `unknown`. */
  readonly calls = new LabelledCounter(['method', 'transport', 'outcome'], 1000);
  /** The `ok` series of `calls` by method, per transport (see count). */
  private readonly okSeries = { http: new Map<string, { value: number }>(), tcp: new Map<string, { value: number }>() };
  /** Successful outbound sends, by method. */
  readonly sent = new LabelledCounter(['method'], 50);
  received = 0;
  replays = 0;
  replayBacklog = 0;

  /** Successful outbound sends, every method. */
  sentTotal(): number {
    return this.sent.samples().reduce((sum, s) => sum + s.value, 0);
  }

  /** Counts the calls `invoke` makes. */
  count(invoke: Invoke, transport: 'http' | 'tcp'): Invoke {
    // A successful call's method is one the daemon knows (a bounded set): its series is kept.
    const okSeries = this.okSeries[transport];
    const ok = (method: string) => {
      let series = okSeries.get(method);
      if (!series) {
        series = this.calls.series([method, transport, 'ok']);
        okSeries.set(method, series);
      }
      series.value += 1;
    };
    const failed = (method: string, err: unknown) => {
      const code = err instanceof RpcFailure ? err.rpcCode : RpcErrorCode.INTERNAL_ERROR;
      // Client-chosen names are not labels: an unknown method is counted as `unknown`.
      const name = code === RpcErrorCode.METHOD_NOT_FOUND ? 'unknown' : method;
      this.calls.inc([name, transport, OUTCOME[code] ?? `error_${Math.abs(code)}`]);
    };
    return (method, params, call) =>
      settle(
        () => invoke(method, params, call),
        (value) => {
          ok(method);
          return value;
        },
        (err) => {
          failed(method, err);
          throw err;
        },
      );
  }

  render(g: DaemonGauges): string {
    const s = g.status;
    const gauge = (name: string, help: string, samples: MetricSample[]): MetricFamily => ({
      name,
      help,
      type: 'gauge',
      samples,
    });
    const ms = (t: number | null): MetricSample[] => (t === null ? [] : [{ value: t / 1000 }]);
    return renderMetrics([
      {
        name: 'vigil_daemon_rpc_calls_total',
        help: 'JSON-RPC calls, by method, transport and outcome (ok, or the error: invalid_params, user_error, io_error, ...).',
        type: 'counter',
        samples: this.calls.samples(),
      },
      {
        name: 'vigil_daemon_messages_sent_total',
        help: 'Successful outbound sends (send, sendReceipt, ...), by method.',
        type: 'counter',
        samples: this.sent.samples(),
      },
      {
        name: 'vigil_daemon_messages_received_total',
        help: 'Incoming messages stored in the inbox.',
        type: 'counter',
        samples: [{ value: this.received }],
      },
      {
        name: 'vigil_daemon_sse_replays_total',
        help: 'Event streams opened with a Last-Event-ID that had missed messages to replay.',
        type: 'counter',
        samples: [{ value: this.replays }],
      },
      {
        name: 'vigil_daemon_sse_replayed_messages_total',
        help: 'Messages those streams had missed when they reconnected.',
        type: 'counter',
        samples: [{ value: this.replayBacklog }],
      },
      gauge('vigil_daemon_consumers', 'Connected consumers, by transport (SSE streams, TCP connections).', [
        { labels: { transport: 'sse' }, value: s.consumers.sse },
        { labels: { transport: 'tcp' }, value: s.consumers.tcp },
      ]),
      gauge(
        'vigil_daemon_backend_state',
        'The backend state: 1 for the current one (serving, starting, down).',
        BACKEND_STATES.map((state) => ({
          labels: { kind: s.backend.kind, state },
          value: s.backend.state === state ? 1 : 0,
        })),
      ),
      gauge('vigil_daemon_backend_up', '1 when the backend is serving.', [
        { value: s.backend.state === 'serving' ? 1 : 0 },
      ]),
      gauge('vigil_daemon_inbox_messages', 'Messages kept in the inbox for replay.', [{ value: g.inboxSize }]),
      gauge('vigil_daemon_inbox_bytes', 'Bytes of messages kept in the inbox for replay.', [{ value: g.inboxBytes }]),
      gauge(
        'vigil_daemon_held_messages',
        'Messages held for each consumer: arrived since its last read, waiting for it (0 with --hold off).',
        s.consumers.list.map((c) => ({ labels: { consumer: c.name }, value: c.held })),
      ),
      gauge(
        'vigil_daemon_held_oldest_age_seconds',
        'Age of the oldest message held for each consumer (absent when none is held).',
        s.consumers.list.flatMap((c) =>
          c.oldestHeldAgeS === null ? [] : [{ labels: { consumer: c.name }, value: c.oldestHeldAgeS }],
        ),
      ),
      gauge(
        'vigil_daemon_consumer_connections',
        'Open connections (SSE streams, TCP connections) of each consumer; 0 while it is away.',
        s.consumers.list.map((c) => ({ labels: { consumer: c.name }, value: c.connections })),
      ),
      gauge('vigil_daemon_inbox_head', 'Sequence number of the newest message in the inbox.', [{ value: g.inboxHead }]),
      gauge(
        'vigil_daemon_last_inbound_timestamp_seconds',
        'When the last incoming message arrived (absent until one does).',
        ms(s.lastInboundMessageAt),
      ),
      gauge(
        'vigil_daemon_last_outbound_timestamp_seconds',
        'When the last outbound send succeeded (absent until one does).',
        ms(s.lastOutboundSendAt),
      ),
      gauge('vigil_daemon_uptime_seconds', 'Seconds since the daemon started.', [{ value: s.uptimeS }]),
      {
        name: 'vigil_daemon_info',
        help: 'The daemon version and account.',
        type: 'gauge',
        samples: [{ labels: { version: s.version, account: s.account, backend: s.backend.kind }, value: 1 }],
      },
    ]);
  }
}

/** The metrics listener: `GET /metrics` (and HEAD), 404 elsewhere, 405 for other methods. */
export function metricsServer(bindHost: string, render: () => string, logger: Logger): Server {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, type: string, body: string, extra: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...extra });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (!hostAllowed(req.headers.host, bindHost)) return reply(421, 'text/plain', 'Misdirected Request\n');
    if (path !== METRICS_PATH) return reply(404, 'text/plain', 'Not Found\n');
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return reply(405, 'text/plain', 'Method Not Allowed\n', { allow: 'GET, HEAD' });
    try {
      reply(200, PROMETHEUS_CONTENT_TYPE, render());
    } catch (err) {
      logger.error('metrics failed', { error: String(err) });
      reply(500, 'text/plain', 'metrics failed\n');
    }
  });
  server.keepAliveTimeout = 5000;
  return server;
}

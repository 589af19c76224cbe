/**
 * The page's data, gathered from what the stack already writes and serves: the supervisor's
 * status (its control socket), the guardian's log and state file, the health log, the daemon's
 * `/api/v1/check` JSON and metrics, the inference server's `/metrics` and log. Logs are read
 * incrementally (LogTail); the services are asked at most once per refresh, each within a short
 * time, so a hung service slows nothing down.
 */

import { dirname, isAbsolute, resolve } from 'node:path';
import {
  type GuardianConfig,
  guardianConfigSchema,
  type HealthConfig,
  type HostPort,
  healthConfigSchema,
} from '@vigil/shared-types';
import { daemonClient, inferenceClient, readConfigFile, readTextOrNull, Wire } from '@vigil/shared-types/node';
import { controlRequest, type ServiceStatus, type SupervisorStatus } from '../control.js';
import { UsageError } from '../errors.js';
import { GuardianHistory, HealthHistory } from './history.js';
import { type MetricLine, metricSum, parseMetrics, Rate } from './probe.js';
import { jsonLines, LogTail } from './tail.js';

export interface PageConfig {
  /** The stack's home (the supervisor's control socket; the token, actions log and address file). */
  readonly home: string;
  readonly socket: string;
  readonly guardianConfig: string;
  readonly healthConfig: string;
  /** The guardian's event log, when its configuration has no logFile (it then logs to stdout). */
  readonly guardianLog?: string | undefined;
  /** The daemon's HTTP listener, where the health check's `daemon.http` is not the page's way to it. */
  readonly daemon?: HostPort | null | undefined;
  /** The daemon's metrics listener, when it has one (messages per minute). */
  readonly daemonMetrics: HostPort | null;
  /** How long each service may take to answer, per refresh. */
  readonly askTimeoutMs: number;
}

export interface Snapshot {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly supervisor: { status: SupervisorStatus; services: readonly ServiceStatus[] } | { error: string };
  readonly guardian: {
    readonly history: GuardianHistory;
    /** The state file's machine, or null. */
    readonly machine: Record<string, unknown> | null;
    readonly limits: { maxRestarts: number; restartWindowS: number; circuitCauses: number; circuitWindowS: number };
    readonly configFile: string;
  };
  readonly health: HealthHistory;
  readonly messaging: {
    readonly check: Record<string, unknown> | null;
    readonly error: string | null;
    readonly sentPerMin: number | null;
    readonly receivedPerMin: number | null;
    readonly metrics: boolean;
  };
  readonly inference: {
    readonly metrics: readonly MetricLine[] | null;
    readonly error: string | null;
    readonly requestsPerS: number | null;
    readonly tokensPerS: number | null;
    readonly lastErrors: readonly Record<string, unknown>[];
  };
}

const ERROR_LINES = 5;
/** What the page reads of a service's answer: at most 1 MiB, on a connection of its own. */
const ASK = { maxBytes: 1 << 20, userAgent: 'vigil-status-page' } as const;

export class Collector {
  readonly guardianConf: GuardianConfig;
  readonly healthConf: HealthConfig;
  private readonly guardianTail: LogTail;
  private readonly healthTail: LogTail;
  private readonly inferenceTail: LogTail | null;
  private readonly guardian = new GuardianHistory();
  private readonly health = new HealthHistory();
  private readonly sent = new Rate(60_000);
  private readonly received = new Rate(60_000);
  private readonly requests = new Rate(10_000);
  private readonly tokens = new Rate(10_000);
  private lastErrors: Record<string, unknown>[] = [];

  constructor(readonly config: PageConfig) {
    const base = dirname(config.guardianConfig);
    this.guardianConf = readConfigFile(
      config.guardianConfig,
      guardianConfigSchema((p) => (isAbsolute(p) ? p : resolve(base, p))),
    );
    this.healthConf = readConfigFile(config.healthConfig, healthConfigSchema(dirname(config.healthConfig)));
    const events = config.guardianLog ?? this.guardianConf.logFile;
    if (!events) {
      throw new UsageError(
        `${config.guardianConfig} has no logFile (the guardian logs to stdout): give --guardian-log FILE`,
      );
    }
    this.guardianTail = new LogTail(events);
    this.healthTail = new LogTail(this.healthConf.healthLog ?? `${dirname(config.healthConfig)}/health.log`);
    const log = this.guardianConf.primary.log;
    this.inferenceTail = log ? new LogTail(log) : null;
  }

  /** Reads what the logs gained; cheap when they gained nothing. */
  readLogs(): void {
    for (let more = true; more; ) {
      const { lines, reset } = this.guardianTail.read();
      if (reset) this.guardian.clear();
      this.guardian.add(jsonLines(lines));
      more = lines.length > 0 && this.guardianTail.pending();
    }
    for (let more = true; more; ) {
      const { lines, reset } = this.healthTail.read();
      if (reset) this.health.clear();
      this.health.add(jsonLines(lines));
      more = lines.length > 0 && this.healthTail.pending();
    }
    if (this.inferenceTail) {
      const errors = jsonLines(this.inferenceTail.read().lines).filter(
        (r) => r.level === 'error' || r.level === 'warn',
      );
      if (errors.length > 0) this.lastErrors = [...this.lastErrors, ...errors].slice(-ERROR_LINES);
    }
  }

  private async supervisor(): Promise<Snapshot['supervisor']> {
    try {
      const r = await controlRequest(
        this.config.home,
        this.config.socket,
        { action: 'status' },
        this.config.askTimeoutMs,
      );
      return { status: r.supervisor!, services: r.services ?? [] };
    } catch (err) {
      return { error: (err as Error).message };
    }
  }

  /** Each service's time to answer, per refresh. */
  private ask(): { timeoutMs: number } {
    return { timeoutMs: this.config.askTimeoutMs };
  }

  private async messaging(now: number): Promise<Snapshot['messaging']> {
    const daemon = this.config.daemon ?? this.healthConf.daemon.http;
    const [check, metrics] = await Promise.allSettled([
      daemonClient(daemon, ASK).status(this.ask()),
      this.config.daemonMetrics ? new Wire({ address: this.config.daemonMetrics }, ASK).metrics(this.ask()) : null,
    ]);
    let parsed: Record<string, unknown> | null = null;
    let error: string | null = null;
    if (check.status === 'fulfilled') {
      parsed = check.value.status as unknown as Record<string, unknown>;
      if (!check.value.serving) error = 'HTTP 503';
    } else error = (check.reason as Error).message;
    const lines = metrics.status === 'fulfilled' && metrics.value !== null ? parseMetrics(metrics.value) : null;
    if (lines) {
      // A labelled counter has no sample until its first count: none is 0.
      this.sent.add(now, metricSum(lines, 'vigil_daemon_messages_sent_total') ?? 0);
      this.received.add(now, metricSum(lines, 'vigil_daemon_messages_received_total') ?? 0);
    }
    const perMin = (r: Rate) => (lines ? ((v) => (v === null ? null : v * 60))(r.perSecond()) : null);
    return {
      check: parsed,
      error,
      sentPerMin: perMin(this.sent),
      receivedPerMin: perMin(this.received),
      metrics: lines !== null,
    };
  }

  private async inference(now: number): Promise<Snapshot['inference']> {
    let lines: MetricLine[] | null = null;
    let error: string | null = null;
    try {
      lines = parseMetrics(await inferenceClient({ address: this.guardianConf.primary.http }, ASK).metrics(this.ask()));
    } catch (err) {
      error = (err as Error).message;
    }
    if (lines) {
      this.requests.add(now, metricSum(lines, 'inference_requests_total'));
      const prompt = metricSum(lines, 'inference_prompt_tokens_total') ?? 0;
      this.tokens.add(now, prompt + (metricSum(lines, 'inference_completion_tokens_total') ?? 0));
    }
    return {
      metrics: lines,
      error,
      requestsPerS: lines ? this.requests.perSecond() : null,
      tokensPerS: lines ? this.tokens.perSecond() : null,
      lastErrors: this.lastErrors,
    };
  }

  private machine(): Record<string, unknown> | null {
    const text = readTextOrNull(this.guardianConf.stateFile);
    if (!text) return null;
    try {
      const m = (JSON.parse(text) as { machine?: unknown }).machine;
      return m && typeof m === 'object' ? (m as Record<string, unknown>) : null;
    } catch {
      return null; // being replaced, or damaged: the guardian says so in its log
    }
  }

  /** Everything, now. */
  async snapshot(): Promise<Snapshot> {
    const now = Date.now();
    this.readLogs();
    const [supervisor, messaging, inference] = await Promise.all([
      this.supervisor(),
      this.messaging(now),
      this.inference(now),
    ]);
    const g = this.guardianConf;
    return {
      at: now,
      supervisor,
      guardian: {
        history: this.guardian,
        machine: this.machine(),
        limits: {
          maxRestarts: g.maxRestarts,
          restartWindowS: g.restartWindowS,
          circuitCauses: g.circuitBreakerCauses,
          circuitWindowS: g.circuitWindowS,
        },
        configFile: this.config.guardianConfig,
      },
      health: this.health,
      messaging,
      inference,
    };
  }
}

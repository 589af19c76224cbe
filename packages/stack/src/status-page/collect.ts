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
import { UsageError } from '../errors.js';
import { GuardianHistory, HealthHistory } from './history.js';
import { type ManagerConfig, type ServicesView, servicesView } from './managers.js';
import { type MetricLine, metricSum, parseMetrics, Rate } from './probe.js';
import { jsonLines, LogTail } from './tail.js';

/** `home`: the stack's home (the supervisor's control socket; the token, actions log and address file). */
export interface PageConfig extends ManagerConfig {
  readonly guardianConfig: string;
  readonly healthConfig: string;
  /** The guardian's event log, when its configuration has no logFile (it then logs to stdout). */
  readonly guardianLog?: string | undefined;
  /** The daemon's HTTP listener, where the health check's `daemon.http` is not the page's way to it. */
  readonly daemon?: HostPort | null | undefined;
  /** The daemon's metrics listener, for messages per minute from a daemon whose status has no counters. */
  readonly daemonMetrics: HostPort | null;
  /** How long each service may take to answer, per refresh. */
  readonly askTimeoutMs: number;
}

export interface Snapshot {
  /** Milliseconds since the epoch. */
  readonly at: number;
  readonly services: ServicesView;
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
    /** Whether the daemon's message counters were read (its status, else its metrics listener). */
    readonly counted: boolean;
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
/** systemctl and launchctl are asked at most once a second (a process each time). */
const MANAGER_EVERY_MS = 1000;
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
  private view: { at: number; view: Promise<ServicesView> } | null = null;

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

  private services(now: number): Promise<ServicesView> {
    const every = this.config.restartWith === 'supervisor' ? 0 : MANAGER_EVERY_MS;
    if (!this.view || now - this.view.at >= every)
      this.view = { at: now, view: servicesView(this.config, this.config.askTimeoutMs) };
    return this.view.view;
  }

  /** Each service's time to answer, per refresh. */
  private ask(): { timeoutMs: number } {
    return { timeoutMs: this.config.askTimeoutMs };
  }

  private async messaging(now: number): Promise<Snapshot['messaging']> {
    const daemon = this.config.daemon ?? this.healthConf.daemon.http;
    let parsed: Record<string, unknown> | null = null;
    let error: string | null = null;
    try {
      const check = await daemonClient(daemon, ASK).status(this.ask());
      parsed = check.status as unknown as Record<string, unknown>;
      if (!check.serving) error = 'HTTP 503';
    } catch (err) {
      error = (err as Error).message;
    }
    // The daemon's message counters are in the status the page asks anyway; a daemon without
    // them (an older one) is asked on its metrics listener, when the page was given one.
    const counters = parsed?.messages as { sent?: unknown; received?: unknown } | undefined;
    let counts: { sent: number; received: number } | null = null;
    if (typeof counters?.sent === 'number' && typeof counters.received === 'number') {
      counts = { sent: counters.sent, received: counters.received };
    } else if (this.config.daemonMetrics) {
      const lines = await new Wire({ address: this.config.daemonMetrics }, ASK).metrics(this.ask()).then(
        (text) => parseMetrics(text),
        () => null,
      );
      // A labelled counter has no sample until its first count: none is 0.
      if (lines) {
        counts = {
          sent: metricSum(lines, 'vigil_daemon_messages_sent_total') ?? 0,
          received: metricSum(lines, 'vigil_daemon_messages_received_total') ?? 0,
        };
      }
    }
    if (counts) {
      this.sent.add(now, counts.sent);
      this.received.add(now, counts.received);
    }
    const perMin = (r: Rate) => (counts ? ((v) => (v === null ? null : v * 60))(r.perSecond()) : null);
    return {
      check: parsed,
      error,
      sentPerMin: perMin(this.sent),
      receivedPerMin: perMin(this.received),
      counted: counts !== null,
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
    const [services, messaging, inference] = await Promise.all([
      this.services(now),
      this.messaging(now),
      this.inference(now),
    ]);
    const g = this.guardianConf;
    return {
      at: now,
      services,
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

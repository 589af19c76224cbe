/**
 * The guardian's configuration file, declared once: this schema gives its TypeScript type, its
 * validation (every problem at once, with its path), its defaults (the limits of spec 8) and its
 * messages. The guardian reads the file with it; the stack and the installers write it.
 *
 * Paths in the file may be relative: `guardianConfigSchema(resolvePath)` resolves each through
 * `resolvePath` (the guardian passes one that resolves against the file's own directory); the
 * schema itself does no I/O.
 */
import { addressSchema, serviceManagerSchema, strictObject, z } from './config.js';
import { GUARDIAN_DEFAULTS } from './guardian.js';
import { formatHostPort, INFERENCE_HTTP } from './net.js';
import { httpUrlSchema, NOTIFY_DEFAULTS, webhookSchema } from './notify.js';
import type { ServiceManagerConfig } from './service.js';

/** Defaults of the guardian's keys that are not limits of spec 8 (those are GUARDIAN_DEFAULTS). */
export const GUARDIAN_CONFIG_DEFAULTS = {
  circuitWindowS: 3600,
  recentLogS: 300,
  commandTimeoutS: 30,
  probePrompt: 'ping',
  canaryPrompt: 'Reply with one word: hello.',
  canaryMaxTokens: 16,
  stateFile: 'guardian-state.json',
  lockFile: 'inference-fallback.lock',
  standaloneTimeoutS: 30,
  alertTimeoutS: 5,
  startGraceS: 120,
  busyCheckS: 3,
} as const;

/** Seconds, 0 allowed (a cadence of 0 is "off", an interval of 0 "back to back"). */
const seconds = (def: number) => z.number().min(0).default(def);
/** Seconds that must be more than 0 (a limit, a window). */
const positive = (def: number) => z.number().min(0.001).default(def);
/** A count, at least 1. */
const count = (def: number) => z.number().int().min(1).default(def);
const text = () => z.string().min(1);
const argv = () => z.array(z.string()).min(1, 'must not be empty');

/** A service manager whose `command` argvs, when given, are not empty. */
const service = serviceManagerSchema.superRefine((s, ctx) => {
  if (s.kind !== 'command') return;
  for (const action of ['restart', 'stop', 'start'] as const) {
    if (s[action]?.length === 0) ctx.addIssue({ code: 'custom', path: [action], message: 'must not be empty' });
  }
});

/** The label events give a backend when the file names none: the launchd label, the systemd unit, or its role. */
function defaultAgent(s: ServiceManagerConfig, role: 'primary' | 'fallback'): string {
  return s.kind === 'launchd' ? s.label : s.kind === 'systemd' ? s.unit : role;
}

/** A path in the file, mapped through `resolvePath` (relative paths: against the file's directory). */
const pathOf = (resolvePath: (path: string) => string) => () => text().transform((p) => resolvePath(p));
type PathSchema = ReturnType<typeof pathOf>;

/** The schemas of the primary and the fallback backend. */
function backendSchemas(path: PathSchema) {
  /**
   * Probes over mutual TLS instead of the plain listener: the server's mTLS address, the client
   * certificate and key it accepts, and the CA that signed the server's certificate.
   */
  const mtls = strictObject({
    address: addressSchema,
    cert: path(),
    key: path(),
    ca: path(),
    /** The name the server's certificate must carry (default: the address's host). */
    servername: text().optional(),
  });

  const primary = strictObject({
    /** The label events give it (default: the launchd label, the systemd unit, or `primary`). */
    agent: text().optional(),
    /** Its plain HTTP listener. */
    http: addressSchema.prefault(formatHostPort(INFERENCE_HTTP)),
    /** Probe over mutual TLS (the plain listener may be off). */
    mtls: mtls.optional(),
    /** A file whose first line is the server's API key (its --api-key-file): plain-HTTP probes send it as a Bearer token. */
    apiKeyFile: path().optional(),
    /** The model id probes ask for. */
    model: text(),
    service,
    /** Its access log: lines of successful completions defer probes (busy detection). */
    accessLog: path().optional(),
    /** Its log, scanned for fatal patterns. */
    log: path().optional(),
    /** The binary the integrity check verifies. */
    binary: path().optional(),
    /** A sha256 manifest of the binary (inference-server's manifest JSON, or `sha256sum` lines). */
    manifest: path().optional(),
    /** Also run `codesign --verify --strict` on the binary (macOS). */
    codesign: z.boolean().default(false),
    /** The argv `restore` runs to prove the binary works standalone (must exit 0). */
    standalone: argv().optional(),
    standaloneTimeoutS: positive(GUARDIAN_CONFIG_DEFAULTS.standaloneTimeoutS),
  }).superRefine((p, ctx) => {
    for (const key of ['manifest', 'codesign'] as const) {
      if (p[key] && p.binary === undefined) {
        ctx.addIssue({ code: 'custom', path: [key], message: 'needs primary.binary' });
      }
    }
  });

  /** A fallback backend: its address and model default to the primary's. */
  const fallback = strictObject({
    agent: text().optional(),
    http: addressSchema.optional(),
    mtls: mtls.optional(),
    apiKeyFile: path().optional(),
    model: text().optional(),
    service,
    accessLog: path().optional(),
  });

  return { primary, fallback };
}

/**
 * Alerts: a message through the messaging daemon (`rpc` and `recipient`), a JSON POST to a
 * webhook that does not need the daemon (`webhook`), or both.
 */
function alertSchema() {
  return strictObject({
    /** The messaging daemon's HTTP listener (JSON-RPC at /api/v1/rpc). */
    rpc: addressSchema.optional(),
    recipient: z.array(text()).min(1, 'must not be empty').optional(),
    /** The sending account, for a daemon serving several (signal-cli's multi-account mode). */
    account: text().optional(),
    timeoutS: positive(GUARDIAN_CONFIG_DEFAULTS.alertTimeoutS),
    webhook: webhookSchema.optional(),
  }).superRefine((a, ctx) => {
    if (a.rpc && !a.recipient)
      ctx.addIssue({ code: 'custom', path: ['recipient'], message: 'required with alert.rpc' });
    if (a.recipient && !a.rpc)
      ctx.addIssue({ code: 'custom', path: ['rpc'], message: 'required with alert.recipient' });
    if (!a.rpc && !a.recipient && !a.webhook) {
      ctx.addIssue({ code: 'custom', message: 'set rpc and recipient (a message), webhook, or both' });
    }
  });
}

/** The schema of the guardian's configuration file; `resolvePath` maps each path as written. */
export function guardianConfigSchema(resolvePath: (path: string) => string = (p) => p) {
  const path = pathOf(resolvePath);
  const { primary, fallback } = backendSchemas(path);
  const D = GUARDIAN_DEFAULTS;
  const E = GUARDIAN_CONFIG_DEFAULTS;
  return strictObject({
    intervalS: seconds(D.intervalS),
    probeBudgetS: positive(D.probeBudgetS),
    busyWindowS: seconds(D.busyWindowS),
    failuresBeforeRestart: count(D.failuresBeforeRestart),
    maxRestarts: count(D.maxRestarts),
    restartWindowS: positive(D.restartWindowS),
    modelListIntervalS: seconds(D.modelListIntervalS),
    canaryIntervalS: seconds(D.canaryIntervalS),
    integrityIntervalS: seconds(D.integrityIntervalS),
    circuitBreakerCauses: count(D.circuitBreakerCauses),
    circuitWindowS: positive(E.circuitWindowS),
    recentLogS: seconds(E.recentLogS),
    /** After a start, restart, restore or fallback: a loading server is not a failure this long. */
    startGraceS: seconds(E.startGraceS),
    /** The model list must answer this soon for a recent success to defer a probe (busy). */
    busyCheckS: positive(E.busyCheckS),
    commandTimeoutS: positive(E.commandTimeoutS),
    probePrompt: text().default(E.probePrompt),
    canaryPrompt: text().default(E.canaryPrompt),
    canaryMaxTokens: count(E.canaryMaxTokens),
    stateFile: path().prefault(E.stateFile),
    lockFile: path().prefault(E.lockFile),
    /** The event log; absent: standard output. */
    logFile: path().optional(),
    /** A Prometheus textfile (node_exporter's textfile collector), rewritten atomically every tick. */
    metricsFile: path().optional(),
    /** A dead-man's-switch URL: `URL/start` when a tick starts, then `URL` (exit 0) or `URL/<code>`. */
    ping: httpUrlSchema.optional(),
    pingTimeoutS: positive(NOTIFY_DEFAULTS.pingTimeoutS),
    primary,
    fallback: fallback.optional(),
    alert: alertSchema().optional(),
  }).transform((c, ctx) => {
    // The defaults that depend on other keys: the agents, the fallback's address and model.
    const p = { ...c.primary, agent: c.primary.agent ?? defaultAgent(c.primary.service, 'primary') };
    const f = c.fallback && {
      ...c.fallback,
      agent: c.fallback.agent ?? defaultAgent(c.fallback.service, 'fallback'),
      http: c.fallback.http ?? p.http,
      model: c.fallback.model ?? p.model,
    };
    if (f && f.agent === p.agent) {
      ctx.addIssue({ code: 'custom', path: ['fallback', 'agent'], message: 'must differ from the primary agent' });
    }
    const { fallback: _, ...rest } = c;
    return { ...rest, primary: p, ...(f ? { fallback: f } : {}) };
  });
}

export type GuardianConfigSchema = ReturnType<typeof guardianConfigSchema>;
/** The configuration as the guardian uses it: defaults filled, addresses parsed, paths resolved. */
export type GuardianConfig = z.output<GuardianConfigSchema>;
/** The configuration as written in the file. */
export type GuardianConfigFile = z.input<GuardianConfigSchema>;
export type GuardianPrimaryConfig = GuardianConfig['primary'];
/** What the guardian needs of either backend (the fallback's keys). */
export type GuardianBackendConfig = Pick<
  GuardianPrimaryConfig,
  'agent' | 'http' | 'mtls' | 'model' | 'service' | 'accessLog'
>;
export type GuardianAlertConfig = NonNullable<GuardianConfig['alert']>;

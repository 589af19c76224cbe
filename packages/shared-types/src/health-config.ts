/**
 * The health check's configuration file (`health.json`), declared once: the health check reads
 * it, the stack and deploy/install write it. Its TypeScript type, its validation, its defaults and
 * its error messages all come from `healthConfigSchema`. Pure: the state directory the default
 * health log lives in is the caller's (the health check takes `$XDG_STATE_HOME/vigil`).
 */
import { addressSchema, serviceManagerSchema, strictObject, z } from './config.js';
import { DAEMON_HTTP, FLOW_GATEWAY, formatHostPort, RETIRED_PORTS } from './net.js';
import { httpUrlSchema, NOTIFY_DEFAULTS, webhookSchema } from './notify.js';

/** The health log's name in the state directory. */
export const HEALTH_LOG_NAME = 'health.log';
/** The lock's name, beside the health log unless `lockFile` says otherwise. */
export const HEALTH_LOCK_NAME = 'health-check.lock';
export const DEFAULT_STORM_PATTERN = 'websocket (connected|opened|connection)';

/** `name` in the directory of `file` (as path.join(dirname(file), name), without node:path). */
export function besideFile(file: string, name: string): string {
  const slash = file.replace(/\/+$/, '').lastIndexOf('/');
  if (slash < 0) return name;
  return slash === 0 ? `/${name}` : `${file.slice(0, slash)}/${name}`;
}

const nonEmpty = z.string().min(1);
const argv = z.array(z.string());

/** A regular expression, matched case-insensitively; the message is the engine's. */
const regExpSource = nonEmpty.superRefine((source, ctx) => {
  try {
    new RegExp(source, 'i');
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
  }
});

const daemonSchema = strictObject({
  /** The daemon's HTTP JSON-RPC address. */
  http: addressSchema.prefault(formatHostPort(DAEMON_HTTP)),
  /** The daemon's program name (executable, or script run by node). */
  program: nonEmpty.default('signal-daemon'),
  /** Substrings that must also appear in its command line (e.g. the account), to tell daemons apart. */
  processMatch: z.array(nonEmpty).default([]),
  service: serviceManagerSchema.optional(),
  /** A direct relaunch when the service manager cannot bring it back (started detached). */
  relaunch: argv.optional(),
  /** Where a relaunched daemon's output goes. */
  relaunchLog: z.string().optional(),
  /** The daemon's log (its `send succeeded` records), for outbound_send. */
  log: z.string().optional(),
});

const gatewaySchema = strictObject({
  address: addressSchema.prefault(formatHostPort(FLOW_GATEWAY)),
  service: serviceManagerSchema.optional(),
  log: z.string().optional(),
  storm: strictObject({
    pattern: regExpSource.default(DEFAULT_STORM_PATTERN),
    threshold: z.number().int().min(1).default(30),
    windowMinutes: z.number().min(0.01).default(15),
  }).prefault({}),
});

const outboundSchema = strictObject({
  maxAgeHours: z.number().min(0.001).default(24),
  /** A real send made by the check itself (to a recipient, or a note to self). */
  probe: strictObject({
    recipient: z.string().optional(),
    noteToSelf: z.boolean().optional(),
    message: z.string().default('vigil health check'),
  })
    .superRefine((probe, ctx) => {
      if (!probe.recipient && !probe.noteToSelf)
        ctx.addIssue({ code: 'custom', message: 'set recipient or noteToSelf' });
    })
    .optional(),
});

/** The schema, with the default health log `STATEDIR/health.log`. */
export function healthConfigSchema(stateDir: string) {
  return strictObject({
    daemon: daemonSchema.prefault({}),
    relay: strictObject({ link: addressSchema, service: serviceManagerSchema.optional() }).optional(),
    retiredPorts: z.array(z.number().int().min(1).max(65535)).default(() => [...RETIRED_PORTS]),
    gateway: gatewaySchema.optional(),
    /** The flow service's JSON configuration and the dotted key that must point at the daemon. */
    flowConfig: strictObject({ path: nonEmpty, key: nonEmpty }).optional(),
    outbound: outboundSchema.prefault({}),
    healthLog: z.string().default(`${stateDir.replace(/\/+$/, '')}/${HEALTH_LOG_NAME}`),
    lockFile: z.string().optional(),
    /** A dead-man's-switch URL: `URL/start` when a run starts, then `URL` (exit 0) or `URL/<code>`. */
    ping: httpUrlSchema.optional(),
    pingTimeoutS: z.number().min(0.001).default(NOTIFY_DEFAULTS.pingTimeoutS),
    /** A webhook alert on exit 2, once per episode (and `resolved` when it ends). */
    alert: strictObject({ webhook: webhookSchema }).optional(),
    /** checkMs: each probe; fixMs: each repair; runMs: all repairs of a run together. */
    timeouts: strictObject({
      checkMs: z.number().int().min(1).default(3000),
      fixMs: z.number().int().min(1).default(15000),
      runMs: z.number().int().min(1).default(30000),
    }).prefault({}),
  }).transform((c) => ({ ...c, lockFile: c.lockFile ?? besideFile(c.healthLog, HEALTH_LOCK_NAME) }));
}

export type HealthConfigSchema = ReturnType<typeof healthConfigSchema>;
/** A validated configuration, every default filled in. */
export type HealthConfig = z.output<HealthConfigSchema>;
/** What a `health.json` may contain (what the stack and deploy/install write). */
export type HealthConfigFile = z.input<HealthConfigSchema>;

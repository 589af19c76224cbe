/**
 * The options of `vigil start`, declared once: each flag's name, environment variable, help and
 * schema are one entry of STACK_OPTIONS. The command-line options, the help text, the validation
 * (messages name the flag), the defaults and the StackOptions type all derive from it.
 */
import {
  ConfigValidationError,
  describeValue,
  formatHostPort,
  type HostPort,
  parseHostPort,
  STATUS_PAGE,
  validateConfig,
  z,
} from '@vigil/shared-types';
import { Option } from 'commander';
import { UsageError } from './errors.js';

/** A flag's text ("127.0.0.1:8080") → a HostPort, with the address parser's own message. */
function parseAddress(text: string, ctx: z.RefinementCtx): HostPort {
  try {
    return parseHostPort(text);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
}
const address = z.string().transform(parseAddress);
/** An address, or `off`. */
const addressOrOff = z.string().transform((text, ctx) => (text === 'off' ? ('off' as const) : parseAddress(text, ctx)));

const seconds = z.string().transform((text, ctx) => {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n < 0) {
    ctx.addIssue({ code: 'custom', message: `expected a number of seconds, got ${describeValue(text)}` });
    return z.NEVER;
  }
  return n;
});

const text = z.string().min(1);

interface OptionSpec {
  /** The flag's value placeholder in the help. */
  readonly arg: string;
  readonly env: string;
  readonly help: string;
  /** The raw text (from the flag or the environment; undefined when neither) → the value. */
  readonly schema: z.ZodType;
}

/** Every option of `vigil start`, keyed by its long flag (without the dashes). */
export const STACK_OPTIONS = {
  account: {
    arg: '<number>',
    env: 'VIGIL_ACCOUNT',
    help: "the daemon's account (default +15550000001)",
    schema: text.default('+15550000001'),
  },
  backend: {
    arg: '<local|signal-cli>',
    env: 'VIGIL_BACKEND',
    help: "the daemon's backend (default local: the local network)",
    schema: z.enum(['local', 'signal-cli']).default('local'),
  },
  'signal-cli': {
    arg: '<path>',
    env: 'VIGIL_SIGNAL_CLI',
    help: 'the signal-cli program (backend signal-cli)',
    schema: text.optional(),
  },
  'signal-cli-config': {
    arg: '<dir>',
    env: 'VIGIL_SIGNAL_CLI_CONFIG',
    help: "signal-cli's data directory (backend signal-cli)",
    schema: text.optional(),
  },
  'daemon-http': {
    arg: '<addr>',
    env: 'VIGIL_DAEMON_HTTP',
    help: 'the daemon over HTTP (default 127.0.0.1:8080)',
    schema: address.default(parseHostPort('127.0.0.1:8080')),
  },
  'daemon-tcp': {
    arg: '<addr>',
    env: 'VIGIL_DAEMON_TCP',
    help: 'the daemon over TCP (default 127.0.0.1:7583)',
    schema: address.default(parseHostPort('127.0.0.1:7583')),
  },
  relay: {
    arg: '<addr>',
    env: 'VIGIL_RELAY',
    help: "the relay's link address (default: 10.0.0.1:7583 when this host has 10.0.0.1, else 127.0.0.1:7584)",
    schema: address.optional(),
  },
  inference: {
    arg: '<addr>',
    env: 'VIGIL_INFERENCE',
    help: 'the inference server over HTTP (default 127.0.0.1:1337)',
    schema: address.default(parseHostPort('127.0.0.1:1337')),
  },
  mtls: {
    arg: '<addr|off>',
    env: 'VIGIL_MTLS',
    help: 'its mutual-TLS listener (default 127.0.0.1:1338; certificates made on first start)',
    schema: addressOrOff.default(parseHostPort('127.0.0.1:1338')),
  },
  'daemon-metrics': {
    arg: '<addr|off>',
    env: 'VIGIL_DAEMON_METRICS',
    help: "the daemon's Prometheus metrics listener, which the status page reads for messages per minute (default off)",
    schema: addressOrOff.default('off'),
  },
  'status-page': {
    arg: '<addr>',
    env: 'VIGIL_STATUS_PAGE',
    help: 'the live status page (default 127.0.0.1:8099; loopback only)',
    schema: address.default(STATUS_PAGE),
  },
  model: {
    arg: '<file>',
    env: 'VIGIL_MODEL',
    help: 'a GGUF model (default: a generated tiny model)',
    schema: text.optional(),
  },
  'model-id': {
    arg: '<id>',
    env: 'VIGIL_MODEL_ID',
    help: 'the model id clients ask for (default vigil)',
    schema: text.default('vigil'),
  },
  threads: {
    arg: '<n>',
    env: 'VIGIL_THREADS',
    help: "inference threads (default: the server's own choice)",
    schema: text.optional(),
  },
  'guardian-interval': {
    arg: '<s>',
    env: 'VIGIL_GUARDIAN_INTERVAL',
    help: 'seconds between guardian ticks (default 10 for the tiny model; 60 with --model, which may load for longer)',
    schema: seconds.optional(),
  },
  'health-interval': {
    arg: '<s>',
    env: 'VIGIL_HEALTH_INTERVAL',
    help: 'seconds between health checks (default 300; 0: never)',
    schema: seconds.default(300),
  },
  'stop-timeout': {
    arg: '<s>',
    env: 'VIGIL_STOP_TIMEOUT',
    help: 'seconds a service may take to end after SIGTERM before it is killed (SIGKILL) (default 10)',
    schema: seconds.default(10),
  },
} as const satisfies Record<string, OptionSpec>;

export type StackOptionName = keyof typeof STACK_OPTIONS;

/** The raw options: each flag's text, or undefined. */
export type RawStackOptions = { [K in StackOptionName]?: string | undefined };

const shape = Object.fromEntries(Object.entries(STACK_OPTIONS).map(([k, o]) => [k, o.schema])) as {
  [K in StackOptionName]: (typeof STACK_OPTIONS)[K]['schema'];
};

/** The schema of the options: raw texts in, typed options (defaults filled) out. */
export const stackOptionsSchema = z.object(shape).transform((o) => ({
  account: o.account,
  backend: o.backend,
  signalCli: o['signal-cli'],
  signalCliConfig: o['signal-cli-config'],
  daemonHttp: o['daemon-http'],
  daemonTcp: o['daemon-tcp'],
  /** Undefined: chosen on start (10.0.0.1:7583 when the host has it, else 127.0.0.1:7584). */
  relay: o.relay,
  inference: o.inference,
  mtls: o.mtls,
  daemonMetrics: o['daemon-metrics'],
  statusPage: o['status-page'],
  model: o.model,
  modelId: o['model-id'],
  threads: o.threads,
  // Two failed ticks restart the server: ticks must be longer than a model takes to load.
  guardianInterval: o['guardian-interval'] ?? (o.model ? 60 : 10),
  healthInterval: o['health-interval'],
  stopTimeout: o['stop-timeout'],
}));

export type StackOptions = z.output<typeof stackOptionsSchema>;

/** The environment variable of a flag. */
export const envOf = (name: StackOptionName): string => STACK_OPTIONS[name].env;

/**
 * The typed options from the flags' texts, each falling back on its environment variable.
 * A bad value is a UsageError naming the flag ("--daemon-http: invalid port …").
 */
export function parseStackOptions(flags: RawStackOptions, env: NodeJS.ProcessEnv = process.env): StackOptions {
  const raw: RawStackOptions = {};
  for (const name of Object.keys(STACK_OPTIONS) as StackOptionName[]) {
    const value = flags[name] ?? env[envOf(name)];
    if (value !== undefined) raw[name] = value;
  }
  try {
    return validateConfig(raw, stackOptionsSchema);
  } catch (err) {
    if (err instanceof ConfigValidationError) throw new UsageError(err.problems.map((p) => `--${p}`).join('; '));
    throw err;
  }
}

/** The commander options of `vigil start`, from the same table (the help names the variables). */
export function stackCommandOptions(): Option[] {
  return (Object.entries(STACK_OPTIONS) as [StackOptionName, OptionSpec][]).map(
    ([name, o]) => new Option(`--${name} ${o.arg}`, `${o.help} [${o.env}]`),
  );
}

/** How an address option is printed in the table and passed to the binaries. */
export const hp = (addr: HostPort): string => formatHostPort(addr);

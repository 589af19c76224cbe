/**
 * The options of `vigil start`, declared once: each flag's name, environment variable, help and
 * parser are one entry of STACK_OPTIONS (defineOptions). The command-line options, the help text, the validation
 * (messages name the flag), the defaults and the StackOptions type all derive from it.
 */
import { INFERENCE_SERVE_OPTIONS } from '@vigil/inference-server/options';
import type { HostPort } from '@vigil/shared-types';
import {
  defineOptions,
  envOf as envOfOption,
  FlagValueError,
  flagParser,
  formatHostPort,
  GUARDIAN_DEFAULTS,
  INFERENCE_MTLS,
  intFlag,
  type OptionSpec,
  type OptionsOf,
  parseHostPort,
  STATUS_PAGE,
  secondsFlag,
} from '@vigil/shared-types/light';
import { SIGNAL_DAEMON_OPTIONS } from '@vigil/signal-daemon/options';
import { Option } from 'commander';
import { UsageError } from './errors.js';

/** An address (`HOST:PORT`). */
const address = { parse: flagParser((text: string) => parseHostPort(text)), format: formatHostPort } as const;
/** An address, or `off`. */
const addressOrOff = {
  parse: flagParser((text: string): HostPort | 'off' => (text === 'off' ? 'off' : parseHostPort(text))),
  format: (a: HostPort | 'off'): string => (a === 'off' ? 'off' : formatHostPort(a)),
} as const;
/** Seconds, fractions allowed; the message shows what was given. */
const seconds = (text: string): number => {
  try {
    return secondsFlag(0)(text);
  } catch {
    throw new FlagValueError(`expected a number of seconds, got ${JSON.stringify(text)}`);
  }
};
/** Text that is not empty. */
const text = (t: string): string => {
  if (t === '') throw new FlagValueError('expected a value');
  return t;
};

/**
 * Every option of `vigil start`, keyed by its long flag. The services' own defaults (their
 * listeners) are read from their tables: one default per option in the repository.
 */
export const STACK_OPTIONS = defineOptions('vigil', {
  account: { arg: '<number>', help: "the daemon's account", parse: text, default: '+15550000001' },
  backend: {
    arg: '<local|signal-cli>',
    help: "the daemon's backend (local: the local network)",
    choices: SIGNAL_DAEMON_OPTIONS.specs.backend.choices,
    default: SIGNAL_DAEMON_OPTIONS.specs.backend.default,
  },
  'signal-cli': { arg: '<path>', help: 'the signal-cli program (backend signal-cli)', parse: text },
  'signal-cli-config': { arg: '<dir>', help: "signal-cli's data directory (backend signal-cli)", parse: text },
  'daemon-http': {
    arg: '<addr>',
    help: 'the daemon over HTTP',
    ...address,
    default: SIGNAL_DAEMON_OPTIONS.specs.http.default,
  },
  'daemon-tcp': {
    arg: '<addr>',
    help: 'the daemon over TCP',
    ...address,
    default: SIGNAL_DAEMON_OPTIONS.specs.tcp.default,
  },
  relay: {
    arg: '<addr>',
    help: "the relay's link address",
    ...address,
    defaultHelp: '10.0.0.1:7583 when this host has 10.0.0.1, else 127.0.0.1:7584',
  },
  inference: {
    arg: '<addr>',
    help: 'the inference server over HTTP',
    ...address,
    default: INFERENCE_SERVE_OPTIONS.specs.http.default,
  },
  mtls: {
    arg: '<addr|off>',
    help: 'its mutual-TLS listener (certificates made on first start)',
    ...addressOrOff,
    default: INFERENCE_MTLS as HostPort | 'off',
  },
  'daemon-metrics': {
    arg: '<addr|off>',
    help: "the daemon's Prometheus metrics listener, which the status page reads for messages per minute",
    ...addressOrOff,
    default: 'off' as HostPort | 'off',
  },
  'status-page': { arg: '<addr>', help: 'the live status page (loopback only)', ...address, default: STATUS_PAGE },
  model: { arg: '<file>', help: 'a GGUF model', parse: text, defaultHelp: 'a generated tiny model' },
  'model-id': { arg: '<id>', help: 'the model id clients ask for', parse: text, default: 'vigil' },
  threads: { arg: '<n>', help: 'inference threads', parse: intFlag(1), defaultHelp: "the server's own choice" },
  'guardian-interval': {
    arg: '<s>',
    help: 'seconds between guardian ticks',
    parse: seconds,
    default: GUARDIAN_DEFAULTS.intervalS as number,
  },
  'health-interval': {
    arg: '<s>',
    help: 'seconds between health checks (0: never)',
    parse: seconds,
    default: 300,
  },
  'stop-timeout': {
    arg: '<s>',
    help: 'seconds a service may take to end after SIGTERM before it is killed (SIGKILL)',
    parse: seconds,
    default: 10,
  },
  'log-max-mib': {
    arg: '<n>',
    help: 'a log under the home over this many MiB is moved to FILE.1 and started again (checked each minute)',
    parse: intFlag(1),
    default: 64,
  },
});

export type StackOptionName = keyof typeof STACK_OPTIONS.specs;

/** The raw options: each flag's text, or undefined. */
export type RawStackOptions = { [K in StackOptionName]?: string | undefined };

/** The typed options of `vigil start`. */
export type StackOptions = OptionsOf<typeof STACK_OPTIONS>;

type Spec = OptionSpec & { readonly parse: (text: string) => unknown };

/** The environment variable of a flag. */
export const envOf = (name: StackOptionName): string => envOfOption(STACK_OPTIONS, name) as string;

/**
 * The typed options from the flags' texts, each falling back on its environment variable.
 * A bad value is a UsageError naming the flag ("--daemon-http: invalid port …").
 */
export function parseStackOptions(flags: RawStackOptions, env: NodeJS.ProcessEnv = process.env): StackOptions {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, spec] of Object.entries(STACK_OPTIONS.specs) as [StackOptionName, Spec][]) {
    const value = flags[name] ?? env[envOf(name)];
    const key = name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (value === undefined) {
      out[key] = spec.default;
      continue;
    }
    if (spec.choices && !spec.choices.includes(value)) {
      problems.push(`--${name}: expected one of ${spec.choices.join(', ')}, got ${JSON.stringify(value)}`);
      continue;
    }
    try {
      out[key] = spec.parse ? spec.parse(value) : value;
    } catch (err) {
      problems.push(`--${name}: ${(err as Error).message}`);
    }
  }
  if (problems.length > 0) throw new UsageError(problems.join('; '));
  return out as StackOptions;
}

/** The commander options of `vigil start`, from the same table (the help names the defaults and variables). */
export function stackCommandOptions(): Option[] {
  return (Object.entries(STACK_OPTIONS.specs) as [StackOptionName, OptionSpec][]).map(([name, o]) => {
    const def = o.defaultHelp ?? (o.default === undefined ? undefined : (o.format ?? String)(o.default as never));
    return new Option(
      `--${name} ${o.arg}`,
      `${o.help}${def === undefined ? '' : ` (default ${def})`} [${envOf(name)}]`,
    );
  });
}

/** How an address option is printed in the table and passed to the binaries. */
export const hp = (addr: HostPort): string => formatHostPort(addr);

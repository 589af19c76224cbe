/**
 * The stack's commands: `start`, `stop`, `restart`, `status`, `logs`. Each is a commander Command
 * that `cli.ts` adds to the program; they read `--home` from the program's options. What only
 * `start` needs (its option schemas, zod, the supervisor) is loaded with import() when it runs, so
 * that `status`, `logs` and `--help` start about as fast as `node` itself.
 */

import type { ConsumerStatus, DaemonStatus, HostPort } from '@vigil/shared-types';
import { daemonClient } from '@vigil/shared-types/light';
import { Command, Option } from 'commander';
import type { RawStackOptions, StackOptionName } from './config.js';
import { controlRequest } from './control.js';
import { NoLogError, UsageError } from './errors.js';
import { LOG_NAMES, logFileOf, printLog } from './logs.js';
import { homeOf, homePaths } from './paths.js';
import { SERVICE_NAMES } from './service-names.js';
import { lastGuardianEvent, lastHealthReport, type StackStatus, statusPageUrl, statusScreen } from './status.js';

const out = (line: string) => process.stdout.write(`${line}\n`);
const SERVICES = SERVICE_NAMES.join(', ');

/** The home's paths, from the program's --home (else VIGIL_HOME, else .vigil/ in the repository). */
const pathsOf = (cmd: Command) => homePaths(homeOf(cmd.optsWithGlobals<{ home?: string }>().home));

/** The running supervisor's stop timeout (what a stop may take before SIGKILL ends it). */
async function stopTimeoutOf(paths: ReturnType<typeof homePaths>): Promise<number> {
  const [{ readStackFile }, { STOP_TIMEOUT_MS }] = await Promise.all([
    import('./stackfile.js'),
    import('./supervisor.js'),
  ]);
  return readStackFile(paths.stackFile)?.stopTimeoutMs ?? STOP_TIMEOUT_MS;
}

/** `start`'s options (zod schemas), added only where `start` runs or its help is asked for (see cli.ts); once. */
export async function addStartOptions(cmd: Command): Promise<void> {
  if (cmd.options.length > 0) return;
  const { stackCommandOptions } = await import('./config.js');
  for (const option of stackCommandOptions()) cmd.addOption(option);
}

/** A control request to the home's supervisor (NoStackError: exit 3 when none runs there). */
async function control(cmd: Command, action: 'start' | 'stop' | 'restart', service: string): Promise<void> {
  const paths = pathsOf(cmd);
  // A stop or restart waits for the old process to end (SIGKILL after the stop timeout).
  const reply = await controlRequest(
    paths.home,
    paths.socket,
    { action, service },
    (await stopTimeoutOf(paths)) + 20_000,
  );
  if (reply.pid) out(`${service} started (pid ${reply.pid})`);
  else if (action === 'stop') out(`${service} stopped`);
}

export function startCommand(): Command {
  const cmd = new Command('start')
    .summary('run the whole stack (or start one service of a running stack)')
    .description(
      'Without SERVICE: starts the vigil stack and keeps it running until Ctrl-C (what `pnpm start` runs).\n' +
        'With SERVICE: starts that service of the stack running from the home.',
    )
    .argument('[service]', `one of ${SERVICES}`);
  cmd.addHelpText(
    'after',
    '\nEach option may also be given by the environment variable in brackets.\n' +
      'Exit codes: 0 stopped cleanly; 1 could not start (a port in use, a service that did not come up);\n' +
      '78 bad usage.',
  );
  return cmd.action(async (service: string | undefined, flags: Record<string, string | undefined>) => {
    if (service !== undefined) return control(cmd, 'start', service);
    const [{ parseStackOptions, STACK_OPTIONS }, { startStack }] = await Promise.all([
      import('./config.js'),
      import('./start.js'),
    ]);
    const raw: RawStackOptions = {};
    for (const name of Object.keys(STACK_OPTIONS.specs) as StackOptionName[]) {
      raw[name] = flags[name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())];
    }
    let options: ReturnType<typeof parseStackOptions>;
    try {
      options = parseStackOptions(raw);
    } catch (err) {
      // Printed with the usage, as a flag commander refused would be.
      if (err instanceof UsageError)
        cmd.error(`error: ${err.message}`, { exitCode: 78, code: 'commander.invalidArgument' });
      throw err;
    }
    await startStack(pathsOf(cmd).home, options);
  });
}

export function stopCommand(): Command {
  return new Command('stop')
    .summary('stop the whole stack, or one service')
    .description(
      'Without SERVICE: stops the stack running from the home, in order (the guardian first, the daemon last),\n' +
        'and returns once every service has ended. With SERVICE: stops that service.',
    )
    .argument('[service]', `one of ${SERVICES}`)
    .action(async function (this: Command, service: string | undefined) {
      if (service !== undefined) return control(this, 'stop', service);
      const paths = pathsOf(this);
      await controlRequest(
        paths.home,
        paths.socket,
        { action: 'shutdown' },
        SERVICE_NAMES.length * (await stopTimeoutOf(paths)) + 20_000,
      );
      out('vigil: stopped');
    });
}

export function restartCommand(): Command {
  return new Command('restart')
    .summary('restart one service of the running stack')
    .description(
      'Stops SERVICE and starts it again; returns once the old process has ended and the new one is started\n' +
        '(not yet ready), as `launchctl kickstart -k` does. The service manager of the stack’s guardian and health check.',
    )
    .argument('<service>', `one of ${SERVICES}`)
    .action(async function (this: Command, service: string) {
      await control(this, 'restart', service);
    });
}

/** The daemon's consumers, from its JSON check (2 s at most); null when it does not answer. */
async function daemonConsumers(addr: HostPort): Promise<readonly ConsumerStatus[] | null> {
  try {
    const { status } = await daemonClient(addr, { timeoutMs: 2000, maxBytes: 1 << 20 }).status();
    const list = (status as Partial<DaemonStatus>).consumers?.list;
    return Array.isArray(list) ? list : null;
  } catch {
    return null;
  }
}

export function statusCommand(): Command {
  return new Command('status')
    .summary('one screen: each service, pid, uptime, restarts; the last guardian event and health result')
    .option('--json', 'print it as one JSON object')
    .action(async function (this: Command, opts: { json?: boolean }) {
      const paths = pathsOf(this);
      const reply = await controlRequest(paths.home, paths.socket, { action: 'status' }, 10_000);
      const status: StackStatus = {
        supervisor: reply.supervisor!,
        services: reply.services ?? [],
        guardian: lastGuardianEvent(paths),
        health: lastHealthReport(paths),
        statusPage: statusPageUrl(paths),
        consumers: reply.daemonHttp ? await daemonConsumers(reply.daemonHttp) : undefined,
      };
      if (opts.json) out(JSON.stringify(status));
      else for (const line of statusScreen(status, paths.home)) out(line);
    });
}

function count(text: string): number {
  if (!/^\d+$/.test(text)) throw new UsageError(`-n: expected a number of lines, got "${text}"`);
  return Number(text);
}

export function logsCommand(): Command {
  return new Command('logs')
    .summary("print a service's log")
    .description(
      "Prints the service's log under the home (logs/SERVICE.log; health-check: state/health.log);\n" +
        'the stack need not be running.',
    )
    .argument('<service>', `one of ${LOG_NAMES.join(', ')}`)
    .addOption(new Option('-n, --lines <n>', 'only the last N lines').argParser(count))
    .option('-f, --follow', 'then print what is appended, until Ctrl-C')
    .action(async function (this: Command, service: string, opts: { lines?: number; follow?: boolean }) {
      const file = logFileOf(pathsOf(this), service);
      if (!(await printLog(file, { lines: opts.lines, follow: opts.follow }))) throw new NoLogError(file);
    });
}

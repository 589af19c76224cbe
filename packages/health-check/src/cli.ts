import { HealthExit, type HealthReport, NOTIFY_DEFAULTS, terminalSafe } from '@vigil/shared-types';
import { flagParser, runCli } from '@vigil/shared-types/node';
import { Command, CommanderError, Option } from 'commander';
import { type HealthConfig, loadConfig } from './config.js';
import { NotRunError } from './errors.js';
import { nagiosLine, nagiosUnknown } from './nagios.js';
import { alertOnReport, type Note, Pinger } from './notify.js';
import { appendReport, formatReport, runChecks } from './run.js';
import { VERSION } from './version.js';

const BIN = 'health-check';

/** An http:// or https:// URL (a flag's value). */
function httpUrl(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // said below
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw new Error(`expected an http:// or https:// URL, got "${text}"`);
  return text;
}

interface Options {
  fix?: boolean;
  json?: boolean;
  quiet?: boolean;
  nagios?: boolean;
  config?: string;
  ping?: string;
}

/**
 * The check could not run (exit 3): said on stderr as `health-check: message (hint)` by runCli,
 * or, with --quiet, only by the exit code.
 */
function notRun(err: unknown, o: Options): void {
  if (!o.quiet) throw NotRunError.of(err);
  process.exitCode = HealthExit.UNKNOWN;
}

/**
 * A run that could not run: with --json (and not --quiet) `{"error", "exitCode": 3}` on stdout,
 * with --nagios the plugin's UNKNOWN line.
 */
function printNotRun(message: string, o: Options): void {
  if (o.quiet) return;
  // A Nagios runner reads the plugin line, whatever else the command line says.
  if (o.nagios) process.stdout.write(nagiosUnknown(message));
  else if (o.json) process.stdout.write(`${JSON.stringify({ error: message, exitCode: HealthExit.UNKNOWN })}\n`);
}

/** A ping or alert that failed: one line on stderr, unless quiet (the health log has it anyway). */
function sayFailures(notes: readonly Note[], o: Options): void {
  if (o.quiet) return;
  for (const n of notes) if (!n.ok) process.stderr.write(`${BIN}: ${n.what} failed: ${terminalSafe(n.detail)}\n`);
}

function print(report: HealthReport, o: Options): void {
  if (o.quiet) return;
  if (o.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else if (o.nagios) process.stdout.write(nagiosLine(report));
  else process.stdout.write(formatReport(report, process.stdout.isTTY === true));
}

async function main(o: Options): Promise<void> {
  let config: HealthConfig;
  try {
    config = loadConfig(o.config);
  } catch (err) {
    // No configuration to read the ping from: only --ping can say that this run could not run.
    const pinger = new Pinger(o.ping, NOTIFY_DEFAULTS.pingTimeoutS);
    await pinger.ping(HealthExit.UNKNOWN);
    sayFailures(pinger.notes, o);
    printNotRun(NotRunError.of(err).message, o);
    return notRun(err, o);
  }
  const pinger = new Pinger(o.ping ?? config.ping, config.pingTimeoutS);
  await pinger.ping('start');
  try {
    const report = await runChecks(config, {
      fix: o.fix === true,
      finish: async (r) => {
        const [alerts] = await Promise.all([
          alertOnReport(config.alert?.webhook, config.healthLog, r),
          pinger.ping(r.exitCode),
        ]);
        return [...pinger.notes, ...alerts];
      },
    });
    sayFailures((report as { notifications?: Note[] }).notifications ?? [], o);
    print(report, o);
    process.exitCode = report.exitCode;
  } catch (err) {
    // Could not run at all: say so, and record it in the health log too.
    const message = (err as Error).message;
    await pinger.ping(HealthExit.UNKNOWN);
    sayFailures(pinger.notes, o);
    try {
      appendReport(config.healthLog, {
        ts: Date.now() / 1000,
        fix: o.fix === true,
        error: message,
        exitCode: HealthExit.UNKNOWN,
        ...(pinger.notes.length > 0 ? { notifications: pinger.notes } : {}),
      });
    } catch {
      // the log itself is unwritable: the exit code still says it
    }
    printNotRun(message, o);
    return notRun(err, o);
  }
}

const program = new Command(BIN)
  .description('Check the messaging side and its consumer pipeline; repair with --fix.')
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .option('--fix', 'repair what a machine can, then check again')
  .addOption(new Option('--json', 'print one machine-readable JSON report').conflicts(['nagios']))
  .addOption(
    new Option('--nagios', 'print one Nagios plugin line: VIGIL OK|WARNING|CRITICAL|UNKNOWN - summary | perfdata'),
  )
  .addOption(new Option('--quiet', 'print nothing (the health log is written all the same)').conflicts(['nagios']))
  .addOption(new Option('--config <file>', 'the configuration file (JSON)').env('HEALTH_CHECK_CONFIG'))
  .addOption(
    new Option('--ping <url>', "a dead-man's switch: URL/start when the run starts, then URL or URL/<exit code>")
      .env('HEALTH_CHECK_PING')
      .argParser(flagParser(httpUrl)),
  )
  .exitOverride()
  .action(main);

await runCli(BIN, async () => {
  try {
    await program.parseAsync(process.argv);
  } catch (err) {
    // --help and --version: 0; a usage error (printed by commander) means the check could not
    // run: 3, as Nagios plugins, not the 78 of the other binaries.
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : HealthExit.UNKNOWN;
      const args = process.argv.slice(2);
      if (err.exitCode !== 0)
        printNotRun(err.message.replace(/^error: /, ''), {
          json: args.includes('--json'),
          quiet: args.includes('--quiet'),
          nagios: args.includes('--nagios'),
        });
    } else throw NotRunError.of(err);
  }
});

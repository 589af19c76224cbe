import { HealthExit } from '@vigil/shared-types';
import { runCli } from '@vigil/shared-types/node';
import { Command, CommanderError, Option } from 'commander';
import { type HealthConfig, loadConfig } from './config.js';
import { NotRunError } from './errors.js';
import { appendReport, formatReport, runChecks } from './run.js';
import { VERSION } from './version.js';

const BIN = 'health-check';

interface Options {
  fix?: boolean;
  json?: boolean;
  quiet?: boolean;
  config?: string;
}

/**
 * The check could not run (exit 3): said on stderr as `health-check: message (hint)` by runCli,
 * or, with --quiet, only by the exit code.
 */
function notRun(err: unknown, o: Options): void {
  if (!o.quiet) throw NotRunError.of(err);
  process.exitCode = HealthExit.UNKNOWN;
}

/** With --json (and not --quiet), a run that could not run prints `{"error", "exitCode": 3}`. */
function printNotRun(message: string, o: Options): void {
  if (o.json && !o.quiet) process.stdout.write(`${JSON.stringify({ error: message, exitCode: HealthExit.UNKNOWN })}\n`);
}

async function main(o: Options): Promise<void> {
  let config: HealthConfig;
  try {
    config = loadConfig(o.config);
  } catch (err) {
    printNotRun(NotRunError.of(err).message, o);
    return notRun(err, o);
  }
  try {
    const report = await runChecks(config, { fix: o.fix === true });
    if (o.json && !o.quiet) process.stdout.write(`${JSON.stringify(report)}\n`);
    else if (!o.quiet) process.stdout.write(formatReport(report, process.stdout.isTTY === true));
    process.exitCode = report.exitCode;
  } catch (err) {
    // Could not run at all: say so, and record it in the health log too.
    const message = (err as Error).message;
    try {
      appendReport(config.healthLog, {
        ts: Date.now() / 1000,
        fix: o.fix === true,
        error: message,
        exitCode: HealthExit.UNKNOWN,
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
  .option('--json', 'print one machine-readable JSON report')
  .option('--quiet', 'print nothing (the health log is written all the same)')
  .addOption(new Option('--config <file>', 'the configuration file (JSON)').env('HEALTH_CHECK_CONFIG'))
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
        });
    } else throw NotRunError.of(err);
  }
});

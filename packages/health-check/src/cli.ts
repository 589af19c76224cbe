import { HealthExit } from '@vigil/shared-types';
import { Command, CommanderError, Option } from 'commander';
import { loadConfig } from './config.js';
import { appendReport, formatReport, runChecks } from './run.js';
import { VERSION } from './version.js';

const BIN = 'health-check';

const program = new Command(BIN)
  .description('Check the messaging side and its consumer pipeline; repair with --fix.')
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .option('--fix', 'repair what a machine can, then check again')
  .option('--json', 'print one machine-readable JSON report')
  .option('--quiet', 'print nothing (the health log is written all the same)')
  .addOption(new Option('--config <file>', 'the configuration file (JSON)').env('HEALTH_CHECK_CONFIG'))
  .exitOverride()
  .action(async (o: { fix?: boolean; json?: boolean; quiet?: boolean; config?: string }) => {
    let config: ReturnType<typeof loadConfig>;
    try {
      config = loadConfig(o.config);
    } catch (err) {
      if (!o.quiet) process.stderr.write(`${BIN}: ${(err as Error).message}\n`);
      process.exitCode = HealthExit.UNKNOWN;
      return;
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
      if (!o.quiet) {
        if (o.json) process.stdout.write(`${JSON.stringify({ error: message, exitCode: HealthExit.UNKNOWN })}\n`);
        process.stderr.write(`${BIN}: ${message}\n`);
      }
      process.exitCode = HealthExit.UNKNOWN;
    }
  });

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version: 0; a usage error means the check could not run: 3, as Nagios plugins.
    process.exitCode = err.exitCode === 0 ? 0 : HealthExit.UNKNOWN;
  } else {
    process.stderr.write(`${BIN}: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = HealthExit.UNKNOWN;
  }
}

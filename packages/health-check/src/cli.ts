import { FlagValueError, flagParser, HealthExit, runCli } from '@vigil/shared-types/light';
import { Command, CommanderError, Option } from 'commander';
import type { Options } from './main.js';
import { BIN, VERSION } from './version.js';

/** The run itself, with what it needs (the configuration schemas among them), loaded when needed. */
const run = () => import('./main.js');

/** An http:// or https:// URL (a flag's value). */
function httpUrl(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // said below
  }
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:')
    throw new FlagValueError(`expected an http:// or https:// URL, got "${text}"`);
  return text;
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
  .action(async (o: Options) => (await run()).main(o));

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
        (await run()).printNotRun(err.message.replace(/^error: /, ''), {
          json: args.includes('--json'),
          quiet: args.includes('--quiet'),
          nagios: args.includes('--nagios'),
        });
    } else throw (await import('./errors.js')).NotRunError.of(err);
  }
});

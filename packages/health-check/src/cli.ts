import { addOptions, binProgram, HealthExit, readOptions, runCli } from '@vigil/shared-types/light';
import { Command, CommanderError } from 'commander';
import { HEALTH_CHECK_OPTIONS } from './options.js';
import { BIN, VERSION } from './version.js';

/** The run itself, with what it needs (the configuration schemas among them), loaded when needed. */
const run = () => import('./main.js');

const program = addOptions(
  binProgram(new Command(BIN), 'Check the messaging side and its consumer pipeline; repair with --fix.', VERSION),
  HEALTH_CHECK_OPTIONS,
).action(async () => (await run()).main(readOptions(program, HEALTH_CHECK_OPTIONS)));

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

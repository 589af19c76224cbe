import { ExitCode } from '@vigil/shared-types';
import { Command, CommanderError } from 'commander';
import { start } from './index.js';
import { VERSION } from './version.js';

const program = new Command('guardian')
  .description('Prove every minute that the inference server really answers; restart, rate-limit, fall back.')
  .version(VERSION, '-V, --version', 'print the version and exit')
  .helpOption('-h, --help', 'print this help and exit')
  .exitOverride()
  .action(async () => {
    await start({});
  });

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version end here with exit code 0; usage errors were already printed.
    process.exitCode = err.exitCode === 0 ? ExitCode.OK : ExitCode.CONFIG;
  } else {
    process.stderr.write(`guardian: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = ExitCode.CONFIG;
  }
}

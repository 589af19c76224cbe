import { ExitCode } from '@vigil/shared-types';
import { Command, CommanderError } from 'commander';
import { start } from './index.js';
import { VERSION } from './version.js';

const program = new Command('tcp-relay')
  .description("Republish the messaging daemon's TCP listener on the host-to-VM link address.")
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
    process.stderr.write(`tcp-relay: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = ExitCode.CONFIG;
  }
}

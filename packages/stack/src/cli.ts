import { runCli } from '@vigil/shared-types/node';
import { Command } from 'commander';
import { everyCommand } from './container/every.js';
import { livenessCommand } from './container/liveness.js';
import { installCommand, uninstallCommand } from './deploy/command.js';
import { VERSION } from './version.js';

const program = new Command('vigil').version(VERSION, '-V, --version').exitOverride();
program.addCommand(installCommand());
program.addCommand(uninstallCommand());
program.addCommand(livenessCommand());
program.addCommand(everyCommand());
await runCli('vigil', () => program.parseAsync(process.argv));

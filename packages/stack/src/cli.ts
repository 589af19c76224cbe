/**
 * `vigil`: the stack's command line. `buildProgram` makes the program; each command is added with
 * one `program.addCommand(...)` line. Every command, whoever added it, shares the program's
 * settings (errors as `vigil: …` with the usage, exit codes through runCli: bad usage 78).
 */
import { runCli } from '@vigil/shared-types/node';
import { Command } from 'commander';
import { logsCommand, restartCommand, startCommand, statusCommand, stopCommand } from './commands.js';
import { everyCommand } from './container/every.js';
import { livenessCommand } from './container/liveness.js';
import { installCommand, uninstallCommand } from './deploy/command.js';
import { DEFAULT_HOME, rel } from './paths.js';
import { statusPageCommand } from './status-page/command.js';
import { VERSION } from './version.js';

export function buildProgram(): Command {
  const program = new Command('vigil')
    .description('Runs the vigil stack on this host and shows it on one screen.')
    .version(VERSION, '-V, --version')
    .option('--home <dir>', `everything the stack writes (default: ${rel(DEFAULT_HOME)}) [VIGIL_HOME]`);
  program.addCommand(startCommand());
  program.addCommand(stopCommand());
  program.addCommand(restartCommand());
  program.addCommand(statusCommand());
  program.addCommand(logsCommand());
  program.addCommand(installCommand());
  program.addCommand(uninstallCommand());
  program.addCommand(livenessCommand());
  program.addCommand(everyCommand());
  program.addCommand(statusPageCommand());
  return program;
}

/** The program's settings, given to every command under it. */
function configure(program: Command): Command {
  program
    .exitOverride()
    .showHelpAfterError()
    .configureHelp({ showGlobalOptions: true })
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'vigil: ')) });
  const inherit = (cmd: Command) => {
    for (const sub of cmd.commands) {
      sub.copyInheritedSettings(cmd);
      inherit(sub);
    }
  };
  inherit(program);
  return program;
}

/** `pnpm start -- --flag` passes the `--` along: it is not the end of `vigil start`'s options. */
export function normalizeArgv(args: readonly string[]): string[] {
  const i = args.indexOf('start');
  return i >= 0 && args[i + 1] === '--' ? [...args.slice(0, i + 1), ...args.slice(i + 2)] : [...args];
}

/** Runs `vigil` with the process's arguments. */
export function main(argv: readonly string[] = process.argv): Promise<void> {
  return runCli('vigil', () => configure(buildProgram()).parseAsync(normalizeArgv(argv.slice(2)), { from: 'user' }));
}

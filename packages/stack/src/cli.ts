import { runCli } from '@vigil/shared-types/node';
import { Command } from 'commander';
import { VERSION } from './version.js';

const program = new Command('vigil').version(VERSION, '-V, --version').exitOverride();
await runCli('vigil', () => program.parseAsync(process.argv));

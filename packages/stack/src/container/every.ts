/**
 * Runs a command now and then every N seconds, never two at once: the health check's cron in its
 * container.
 *
 *   vigil every SECONDS -- PROGRAM [ARG...]
 *
 * The interval is measured from the start of one run to the start of the next; a run that
 * overruns is followed at once. The command's exit status is a result, not a reason to stop
 * (the health check exits 1 when it healed something, 2 when a person is needed: both are in
 * its health log). Output passes through. SIGTERM or SIGINT: no new run; a run under way is
 * given SIGTERM and waited for; then exit 0. A second signal exits at once (1). Exit 78: bad usage.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { ConfigError, stopOnSignals } from '@vigil/shared-types/light';
import { Command } from 'commander';

export interface Every {
  /** Ends when stopped: no new run, the one under way given SIGTERM and waited for. */
  readonly done: Promise<void>;
  close(): Promise<void>;
}

/** Starts running `argv` every `seconds`. */
export function every(seconds: number, argv: readonly [string, ...string[]]): Every {
  const [program, ...args] = argv;
  let stopping = false;
  let child: ChildProcess | null = null;
  let wake: (() => void) | null = null;

  const runOnce = () =>
    new Promise<void>((resolve) => {
      const c = spawn(program, args, { stdio: 'inherit' });
      child = c;
      c.on('error', (err) => {
        process.stderr.write(`every: cannot run ${program}: ${err.message}\n`);
        child = null;
        resolve();
      });
      c.on('exit', () => {
        child = null;
        resolve();
      });
    });

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, Math.max(0, ms));
      wake = () => {
        clearTimeout(t);
        resolve();
      };
    });

  const loop = async () => {
    while (!stopping) {
      const started = performance.now();
      await runOnce();
      if (stopping) break;
      await pause(seconds * 1000 - (performance.now() - started));
    }
  };
  const done = loop();
  return {
    done,
    close: async () => {
      stopping = true;
      (child as ChildProcess | null)?.kill('SIGTERM');
      (wake as (() => void) | null)?.();
      await done;
    },
  };
}

/** No log: the runs' own output is what the container shows. */
const quiet = {
  info: () => {},
  error: (msg: string, fields?: Record<string, unknown>) =>
    process.stderr.write(`every: ${msg} ${JSON.stringify(fields)}\n`),
};

/** `vigil every SECONDS -- PROGRAM [ARG...]`. */
export function everyCommand(): Command {
  return new Command('every')
    .description('run PROGRAM now and every SECONDS, never two at once; SIGTERM: the run under way ends, exit 0')
    .usage('SECONDS -- PROGRAM [ARG...]')
    .exitOverride()
    .argument('<seconds>', 'from the start of one run to the start of the next')
    .argument('<program>', 'the command (after --, so that its options are its own)')
    .argument('[args...]', 'its arguments')
    .addHelpText('after', '\nexit codes: 0 stopped by a signal, 1 a second signal, 78 bad usage')
    .action(async (secondsText: string, program: string, args: string[]) => {
      const seconds = Number(secondsText);
      if (!(seconds > 0)) throw new ConfigError(`SECONDS must be a positive number, got "${secondsText}"`);
      const runner = every(seconds, [program, ...args]);
      stopOnSignals(runner, quiet);
      await runner.done;
    });
}

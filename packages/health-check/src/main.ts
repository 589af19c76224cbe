/**
 * One run of the health check, once the command line is read: loaded by cli.ts with `import()`,
 * so that `--help`, `--version` and usage errors never load the configuration schemas (zod).
 */
import { HealthExit, type HealthReport, NOTIFY_DEFAULTS, terminalSafe } from '@vigil/shared-types';
import { type HealthConfig, loadConfig } from './config.js';
import { NotRunError } from './errors.js';
import { nagiosLine, nagiosUnknown } from './nagios.js';
import { alertOnReport, type Note, Pinger } from './notify.js';
import type { Options } from './options.js';
import { appendReport, formatReport, runChecks } from './run.js';
import { BIN } from './version.js';

export type { Options };

/**
 * The check could not run (exit 3): said on stderr as `health-check: message (hint)` by runCli,
 * or, with --quiet, only by the exit code.
 */
function notRun(err: unknown, o: Options): void {
  if (!o.quiet) throw NotRunError.of(err);
  process.exitCode = HealthExit.UNKNOWN;
}

/**
 * A run that could not run: with --json (and not --quiet) `{"error", "exitCode": 3}` on stdout,
 * with --nagios the plugin's UNKNOWN line.
 */
export function printNotRun(message: string, o: Pick<Options, 'json' | 'quiet' | 'nagios'>): void {
  if (o.quiet) return;
  // A Nagios runner reads the plugin line, whatever else the command line says.
  if (o.nagios) process.stdout.write(nagiosUnknown(message));
  else if (o.json) process.stdout.write(`${JSON.stringify({ error: message, exitCode: HealthExit.UNKNOWN })}\n`);
}

/** A ping or alert that failed: one line on stderr, unless quiet (the health log has it anyway). */
function sayFailures(notes: readonly Note[], o: Options): void {
  if (o.quiet) return;
  for (const n of notes) if (!n.ok) process.stderr.write(`${BIN}: ${n.what} failed: ${terminalSafe(n.detail)}\n`);
}

function print(report: HealthReport, o: Options): void {
  if (o.quiet) return;
  if (o.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else if (o.nagios) process.stdout.write(nagiosLine(report));
  else process.stdout.write(formatReport(report, process.stdout.isTTY === true));
}

export async function main(o: Options): Promise<void> {
  let config: HealthConfig;
  try {
    config = loadConfig(o.config);
  } catch (err) {
    // No configuration to read the ping from: only --ping can say that this run could not run.
    const pinger = new Pinger(o.ping, NOTIFY_DEFAULTS.pingTimeoutS);
    await pinger.ping(HealthExit.UNKNOWN);
    sayFailures(pinger.notes, o);
    printNotRun(NotRunError.of(err).message, o);
    return notRun(err, o);
  }
  const pinger = new Pinger(o.ping ?? config.ping, config.pingTimeoutS);
  await pinger.ping('start');
  try {
    const report = await runChecks(config, {
      fix: o.fix === true,
      finish: async (r) => {
        const [alerts] = await Promise.all([
          alertOnReport(config.alert?.webhook, config.healthLog, r),
          pinger.ping(r.exitCode),
        ]);
        return [...pinger.notes, ...alerts];
      },
    });
    sayFailures((report as { notifications?: Note[] }).notifications ?? [], o);
    print(report, o);
    process.exitCode = report.exitCode;
  } catch (err) {
    // Could not run at all: say so, and record it in the health log too.
    const message = (err as Error).message;
    await pinger.ping(HealthExit.UNKNOWN);
    sayFailures(pinger.notes, o);
    try {
      appendReport(config.healthLog, {
        ts: Date.now() / 1000,
        fix: o.fix === true,
        error: message,
        exitCode: HealthExit.UNKNOWN,
        ...(pinger.notes.length > 0 ? { notifications: pinger.notes } : {}),
      });
    } catch {
      // the log itself is unwritable: the exit code still says it
    }
    printNotRun(message, o);
    return notRun(err, o);
  }
}

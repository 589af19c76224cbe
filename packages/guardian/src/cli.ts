import { ExitCode } from '@vigil/shared-types';
import {
  addOptions,
  binProgram,
  type OptionTable,
  runCli,
  serviceNotifier,
  stopOnSignals,
} from '@vigil/shared-types/node';
import { Command } from 'commander';
import { loadConfig } from './config.js';
import { Guardian, type StatusReport } from './guardian.js';
import { runLoop, TickClock } from './loop.js';
import { GUARDIAN_OPTIONS, GUARDIAN_STATUS_OPTIONS } from './options.js';
import { VERSION } from './version.js';

const BIN = 'guardian';

/** A command with the guardian's options (every command takes --config; `status` also --json). */
const withOptions = (cmd: Command, table: OptionTable = GUARDIAN_OPTIONS) => addOptions(cmd, table);

const say = (msg: string) => process.stderr.write(`${BIN}: ${msg}\n`);

/** Runs `fn` with the guardian of the configuration `file`, closed afterwards; `fn` gives the exit code. */
async function withGuardian(file: string, fn: (g: Guardian) => Promise<number> | number): Promise<void> {
  const g = new Guardian(loadConfig(file));
  try {
    process.exitCode = await fn(g);
  } finally {
    g.close();
  }
}

/** The line a guardian that stops for a person prints (the log has the events). */
function manualLine(g: Guardian, configFile: string): string {
  let alerting: StatusReport['alerting'] = null;
  try {
    alerting = g.status().alerting;
  } catch {
    // the state could not be read back: the generic line below still says what to do
  }
  const why = alerting ? `${alerting.reason}: ${alerting.detail}` : 'see the log';
  return (
    `manual intervention required (${why}); once fixed, run \`${BIN} reset --config ${configFile}\`` +
    ` (or \`${BIN} restore --config ${configFile}\` to swap back from the fallback)`
  );
}

const ago = (t: number | null, now: number) =>
  t === null ? 'never' : `${new Date(t * 1000).toISOString()} (${Math.max(0, Math.round(now - t))} s ago)`;

export function humanStatus(s: StatusReport, restartWindowS: number, circuitWindowS: number): string {
  const now = Date.now() / 1000;
  const lock = s.lock as { since_iso?: string; pattern?: string } | string | null;
  const lines = [
    s.mode === 'fallback'
      ? `mode: fallback (${s.agent})${typeof lock === 'object' && lock?.since_iso ? ` since ${lock.since_iso}` : ''}` +
        `${typeof lock === 'object' && lock?.pattern ? `, after "${lock.pattern}" in the primary's log` : ''}`
      : `mode: primary (${s.agent})`,
    s.alerting
      ? `state: ALERTING since ${new Date(s.alerting.since * 1000).toISOString()} (${s.alerting.reason}): ${s.alerting.detail}`
      : s.consecutive > 0
        ? `state: failing (${s.consecutive} consecutive failure${s.consecutive === 1 ? '' : 's'})`
        : 'state: serving',
    `restarts in the last ${restartWindowS} s: ${s.restarts.length}`,
    `root causes in the last ${circuitWindowS} s: ${Object.keys(s.causes).sort().join(', ') || 'none'}`,
    `last probe: ${ago(s.lastProbeAt, now)}; last success: ${ago(s.lastOkAt, now)}`,
  ];
  if (s.binaryMissing) lines.push('binary: MISSING at the last integrity check');
  return `${lines.join('\n')}\n`;
}

const program = binProgram(
  new Command(BIN),
  'Prove every minute that the inference server really answers; restart, rate-limit, fall back.',
  VERSION,
).showHelpAfterError(false);

withOptions(
  program
    .command('run')
    .description('probe every intervalS until stopped (SIGTERM/SIGINT: exit 0) or a person is needed (exit 2)'),
).action((o: { config: string }) =>
  withGuardian(o.config, async (g) => {
    const stop = new AbortController();
    const c = g.config;
    // The longest a tick may take by the guardian's own limits: its probes, the commands of a
    // restart or fallback, and the start-up grace that follows one.
    const maxTickMs = (c.busyCheckS + 3 * c.probeBudgetS + 3 * c.commandTimeoutS + c.startGraceS + 90) * 1000;
    const clock = new TickClock(c.intervalS * 1000, maxTickMs);
    // systemd's Type=notify (or the dev supervisor): the watchdog is fed while the ticks run.
    const notifier = serviceNotifier({ healthy: () => clock.late(), warn: say });
    const loop = runLoop(g, stop.signal, (err) => say(`tick skipped: ${err.message}`), clock);
    notifier.ready(`probing every ${c.intervalS} s`);
    // SIGTERM/SIGINT: the tick under way ends (its probe aborted), then exit 0; a second signal
    // exits 1 at once. When that tick ended otherwise (a person is needed: 2; an error), close
    // does not return: this action sets the exit code and the process ends by itself.
    stopOnSignals(
      {
        close: async () => {
          stop.abort();
          if ((await loop.catch(() => null)) !== ExitCode.OK) await new Promise(() => {});
        },
      },
      { info: () => {}, error: () => {} },
      notifier,
    );
    const code = await loop;
    if (code === ExitCode.MANUAL) say(manualLine(g, o.config));
    return code;
  }),
);

withOptions(
  program.command('tick').description('one tick (for a timer): exit 0 when done, 2 when a person is needed'),
).action((o: { config: string }) =>
  withGuardian(o.config, async (g) => {
    const code = (await g.tick()) ?? ExitCode.OK;
    if (code === ExitCode.MANUAL) say(manualLine(g, o.config));
    return code;
  }),
);

withOptions(
  program.command('status').description('the state: a short summary, or JSON with --json (exit 2 while alerting)'),
  GUARDIAN_STATUS_OPTIONS,
).action((o: { config: string; json?: boolean }) =>
  withGuardian(o.config, (g) => {
    const s = g.status();
    process.stdout.write(
      o.json ? `${JSON.stringify(s)}\n` : humanStatus(s, g.config.restartWindowS, g.config.circuitWindowS),
    );
    return s.alerting ? ExitCode.MANUAL : ExitCode.OK;
  }),
);

withOptions(
  program
    .command('restore')
    .description('swap back to the primary: verify it runs standalone, stop the fallback, remove the lock, start it'),
).action((o: { config: string }) =>
  withGuardian(o.config, async (g) => {
    const r = await g.restore();
    if (r.code === ExitCode.OK) process.stdout.write(`${r.message}\n`);
    else say(r.message);
    return r.code;
  }),
);

withOptions(
  program.command('reset').description('clear the alerting state (rate limit, circuit breaker) after fixing the cause'),
).action((o: { config: string }) =>
  withGuardian(o.config, async (g) => {
    const r = await g.reset();
    process.stdout.write(`${r.message}\n`);
    return r.code;
  }),
);

withOptions(
  program
    .command('check-integrity')
    .description('check the primary binary now: exists, matches its manifest, codesign (exit 2 when not)'),
).action((o: { config: string }) =>
  withGuardian(o.config, async (g) => {
    const r = await g.checkIntegrity();
    if (r.result === 'ok') process.stdout.write(`ok: ${r.detail}\n`);
    else say(`${r.result === 'missing' ? 'binary missing' : 'integrity check failed'}: ${r.detail}`);
    return r.result === 'ok' ? ExitCode.OK : ExitCode.MANUAL;
  }),
);

await runCli(BIN, () => program.parseAsync(process.argv));

/**
 * `vigil status-page`: serves the live status page of the stack of the home (what `vigil start`
 * runs as its service `status-page`, and the installed units run on their own) until SIGTERM or
 * SIGINT.
 */

import { dirname } from 'node:path';
import { ensureDir, formatHostPort, isLoopbackHost, parseHostPort, STATUS_PAGE } from '@vigil/shared-types/light';
import { Command } from 'commander';
import { UsageError } from '../errors.js';
import { homeOf, homePaths } from '../paths.js';
import { RESTART_WITH, type RestartWith } from './restart-with.js';

const log = (level: string, msg: string) =>
  process.stdout.write(`${JSON.stringify({ ts: Date.now() / 1000, level, msg })}\n`);

function address(flag: string, text: string) {
  try {
    return parseHostPort(text);
  } catch (err) {
    throw new UsageError(`${flag}: ${(err as Error).message}`);
  }
}

export function statusPageCommand(): Command {
  return new Command('status-page')
    .summary('serve the live status page (loopback only unless asked)')
    .description(
      'Serves the status page of the stack of the home: services, every guardian probe, health-check runs,\n' +
        'messaging and inference; restarts and guardian reset/restore with the token in state/status-page.token.',
    )
    .option('--listen <addr>', `where to listen (default ${formatHostPort(STATUS_PAGE)}) [VIGIL_STATUS_PAGE]`)
    .option('--allow-non-loopback', 'allow --listen on an address other than loopback')
    .option('--guardian-config <file>', "the guardian's configuration (default HOME/guardian.json)")
    .option('--guardian-log <file>', "the guardian's event log, when its configuration has no logFile")
    .option('--health-config <file>', "the health check's configuration (default HOME/health.json)")
    .option('--daemon <addr>', "the daemon's HTTP listener (default: daemon.http of the health check's configuration)")
    .option(
      '--restart-with <manager>',
      `who runs the services, for their state and restarts: ${RESTART_WITH.join(', ')} (default supervisor: vigil start)`,
    )
    .option('--daemon-metrics <addr>', "the daemon's --metrics listener (messages per minute) [VIGIL_DAEMON_METRICS]")
    .addHelpText(
      'after',
      '\nExit codes: 0 stopped by SIGTERM or SIGINT; 1 cannot listen; 78 bad usage or configuration.',
    )
    .action(async function (this: Command, o: Record<string, string | boolean | undefined>) {
      const paths = homePaths(homeOf(this.optsWithGlobals<{ home?: string }>().home));
      const listen = address(
        '--listen',
        String(o.listen ?? process.env.VIGIL_STATUS_PAGE ?? formatHostPort(STATUS_PAGE)),
      );
      if (!isLoopbackHost(listen.host) && !o.allowNonLoopback) {
        throw new UsageError(
          `--listen ${formatHostPort(listen)} is not a loopback address: add --allow-non-loopback to mean it`,
        );
      }
      // Under an installed stack the home holds only the page's own files: make their directories.
      for (const dir of [dirname(paths.statusToken), dirname(paths.statusAddress), dirname(paths.log('x'))])
        ensureDir(dir);
      const restartWith = String(o.restartWith ?? 'supervisor');
      if (!(RESTART_WITH as readonly string[]).includes(restartWith))
        throw new UsageError(`--restart-with ${restartWith}: one of ${RESTART_WITH.join(', ')}`);
      const metrics = (o.daemonMetrics as string | undefined) ?? process.env.VIGIL_DAEMON_METRICS;
      // The page's server (and what it reads with) is loaded only when the page runs.
      const { startStatusPage } = await import('./server.js');
      const page = await startStatusPage({
        home: paths.home,
        socket: paths.socket,
        restartWith: restartWith as RestartWith,
        guardianConfig: (o.guardianConfig as string | undefined) ?? paths.guardianConfig,
        guardianLog: o.guardianLog as string | undefined,
        healthConfig: (o.healthConfig as string | undefined) ?? paths.healthConfig,
        daemon: o.daemon ? address('--daemon', String(o.daemon)) : null,
        daemonMetrics: metrics ? address('--daemon-metrics', metrics) : null,
        askTimeoutMs: 800,
        listen,
        tokenFile: paths.statusToken,
        actionsLog: paths.log('status-page-actions'),
        addressFile: paths.statusAddress,
        log: (line) => log('info', line),
      });
      log('info', `status page on ${page.url}`);
      await new Promise<void>((resolve) => {
        for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => resolve());
      });
      await page.close();
      log('info', 'stopped');
    });
}

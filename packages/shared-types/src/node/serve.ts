/**
 * The command-line side of a long-running service (the messaging daemon, the relay, the inference
 * server): its service-manager notifications follow its lifecycle's state (lifecycle.ts `onState`),
 * in one place for all three.
 */
import { type StoppableLogger, stopOnSignals } from './cli.js';
import type { ServiceState } from './lifecycle.js';
import { type NotifierOptions, type ServiceNotifier, serviceNotifier } from './sd-notify.js';

/**
 * The notifications of each state: `serving` sends READY=1 with `STATUS=serving WHAT` (READY=1 goes
 * once: a service that said it while loading, as the inference server does once it listens, only
 * changes its STATUS=); `stopping` sends STOPPING=1 (once: the signal handler may have sent it, with
 * the signal's name). `loading` is the state a service starts in; `stopped` ends the process.
 */
export function followLifecycle(notifier: ServiceNotifier, what = ''): (state: ServiceState) => void {
  return (state) => {
    if (state === 'serving') notifier.ready(what ? `serving ${what}` : 'serving');
    else if (state === 'stopping') notifier.stopping('stopping');
  };
}

/**
 * Starts a service under SIGTERM/SIGINT handlers (stopOnSignals: a signal that comes while it starts
 * stops it cleanly once it has started) and a notifier that follows its lifecycle; `what` is said
 * after `serving`. Resolves with the started service; rejects as its start does.
 */
export async function serveUntilSignalled<H extends { close(): Promise<void> }>(
  logger: StoppableLogger & { warn(message: string): void },
  what: string,
  start: (onState: (state: ServiceState) => void) => Promise<H>,
  notify: Omit<NotifierOptions, 'warn'> = {},
): Promise<H> {
  const notifier = serviceNotifier({ ...notify, warn: (m) => logger.warn(m) });
  let started: Promise<H> | undefined;
  stopOnSignals({ close: async () => (await started)?.close() }, logger, notifier);
  started = start(followLifecycle(notifier, what));
  return started;
}

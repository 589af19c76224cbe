/**
 * Service-manager notifications (systemd's sd_notify protocol): `READY=1` once a service serves,
 * `WATCHDOG=1` on a timer while its own work progresses, `STATUS=` lines, `STOPPING=1`.
 *
 * Two ways out, chosen from the environment; without either nothing is sent:
 * - `NOTIFY_SOCKET` (systemd, `Type=notify`): Node has no Unix datagram sockets, so each message
 *   goes through the `systemd-notify` command, which ships with systemd wherever the units run
 *   (the units say `NotifyAccess=all`: the sender is a child of the service). It waits until
 *   systemd has read the message (its barrier), so that systemd still finds the sender's unit.
 *   One command at a time; what comes in the meantime is merged into the next one (bounded).
 * - `VIGIL_NOTIFY_FD` (the dev supervisor of `vigil start`): the same assignments, one a line,
 *   written to that inherited descriptor (a pipe the supervisor reads).
 *
 * The watchdog: with `WATCHDOG_USEC` set (and `WATCHDOG_PID`, if set, this process), a timer at
 * half that period sends `WATCHDOG=1`, but only after `ready()` and only while `healthy()` says
 * so: a blocked event loop never runs the timer, and a service whose own work has stopped (a
 * stalled inference slot, a guardian tick that did not run) says why instead. With `trigger`, the
 * first unhealthy check of an episode also sends `WATCHDOG=trigger` (the manager acts at once
 * rather than at the end of the period).
 */
import { execFile } from 'node:child_process';
import { Socket } from 'node:net';

export interface NotifierOptions {
  /** null: working; a string: why the watchdog is not fed (sent as STATUS=, once per episode). */
  readonly healthy?: () => string | null;
  /** Send WATCHDOG=trigger when an unhealthy episode begins. */
  readonly trigger?: boolean;
  /** The environment to read (tests). */
  readonly env?: NodeJS.ProcessEnv;
  /** One line when the notifications cannot be sent (once). */
  readonly warn?: (message: string) => void;
}

export interface ServiceNotifier {
  /** Where notifications go: 'systemd', 'supervisor', or null (nowhere: nothing is sent). */
  readonly target: 'systemd' | 'supervisor' | null;
  /** The watchdog period in ms, null when none is asked for. */
  readonly watchdogMs: number | null;
  /** READY=1 (with a STATUS= line); starts the watchdog timer. READY=1 goes once: later calls send the STATUS= line alone. */
  ready(status: string): void;
  status(status: string): void;
  /** STOPPING=1; ends the watchdog timer. Once: later calls send nothing. */
  stopping(status?: string): void;
  close(): void;
}

type Sender = (assignments: ReadonlyMap<string, string>) => void;

/** One line for a STATUS= value: no newlines, at most 200 characters. */
const oneLine = (s: string): string => s.replace(/[\r\n]+/g, ' ').slice(0, 200);

/** Sends through `systemd-notify`, one command at a time; assignments that wait are merged. */
function systemdSender(warn: (m: string) => void): Sender {
  let running = false;
  let warned = false;
  const pending = new Map<string, string>();
  const flush = (): void => {
    if (running || pending.size === 0) return;
    const args = [...pending].map(([k, v]) => `${k}=${v}`);
    pending.clear();
    running = true;
    execFile('systemd-notify', args, { timeout: 5000 }, (err) => {
      running = false;
      if (err && !warned) {
        warned = true;
        warn(`service manager notification failed (systemd-notify ${args.join(' ')}): ${oneLine(err.message)}`);
      }
      flush();
    });
  };
  return (assignments) => {
    // STOPPING=1 goes at once, beside a command still running: the process may exit right after
    // (the command, once started, outlives it), and a queued message would be lost with it.
    if (assignments.has('STOPPING')) {
      pending.clear();
      const args = [...assignments].map(([k, v]) => `${k}=${v}`);
      execFile('systemd-notify', args, { timeout: 5000 }, () => {});
      return;
    }
    for (const [k, v] of assignments) {
      // WATCHDOG=trigger wins over a WATCHDOG=1 that waits with it.
      if (k === 'WATCHDOG' && pending.get(k) === 'trigger') continue;
      pending.set(k, v);
    }
    flush();
  };
}

/** Writes to the supervisor's pipe; a pipe that backs up (an unread supervisor) drops lines. */
function pipeSender(fd: number, warn: (m: string) => void): Sender | null {
  let socket: Socket;
  try {
    socket = new Socket({ fd, readable: false, writable: true });
  } catch (err) {
    warn(`VIGIL_NOTIFY_FD=${fd} is not usable: ${oneLine(String(err))}`);
    return null;
  }
  socket.on('error', () => {});
  socket.unref();
  return (assignments) => {
    if (socket.destroyed || socket.writableLength > 4096) return;
    socket.write([...assignments].map(([k, v]) => `${k}=${v}\n`).join(''));
  };
}

/** The watchdog period asked by the environment, in ms; null when none is asked of this process. */
export function watchdogPeriodMs(env: NodeJS.ProcessEnv = process.env): number | null {
  const usec = Number(env.WATCHDOG_USEC);
  if (!Number.isFinite(usec) || usec <= 0) return null;
  if (env.WATCHDOG_PID && Number(env.WATCHDOG_PID) !== process.pid) return null;
  return Math.max(1, Math.round(usec / 1000));
}

/** The notifier of this process: see the module's comment. Never throws. */
export function serviceNotifier(options: NotifierOptions = {}): ServiceNotifier {
  const env = options.env ?? process.env;
  const warn = options.warn ?? (() => {});
  const fd = Number(env.VIGIL_NOTIFY_FD);
  let send: Sender | null = null;
  let target: ServiceNotifier['target'] = null;
  if (env.NOTIFY_SOCKET) {
    send = systemdSender(warn);
    target = 'systemd';
  } else if (env.VIGIL_NOTIFY_FD && Number.isInteger(fd) && fd > 2) {
    send = pipeSender(fd, warn);
    target = send ? 'supervisor' : null;
  }
  const watchdogMs = send ? watchdogPeriodMs(env) : null;
  let timer: NodeJS.Timeout | null = null;
  let lastStatus = '';
  let unhealthy: string | null = null;
  let readySent = false;
  let stoppingSent = false;
  const emit = (pairs: [string, string][]) => send?.(new Map(pairs));
  const beat = (): void => {
    const why = options.healthy?.() ?? null;
    if (why === null) {
      const pairs: [string, string][] = [['WATCHDOG', '1']];
      if (unhealthy !== null) pairs.push(['STATUS', lastStatus]);
      unhealthy = null;
      emit(pairs);
      return;
    }
    if (unhealthy === null) {
      const pairs: [string, string][] = [['STATUS', oneLine(why)]];
      if (options.trigger) pairs.push(['WATCHDOG', 'trigger']);
      emit(pairs);
    }
    unhealthy = why;
  };
  const setStatus = (status: string): void => {
    lastStatus = oneLine(status);
    if (unhealthy === null) emit([['STATUS', lastStatus]]);
  };
  return {
    target,
    watchdogMs,
    ready(status) {
      if (stoppingSent) return;
      if (readySent) return setStatus(status);
      readySent = true;
      lastStatus = oneLine(status);
      emit([
        ['READY', '1'],
        ['STATUS', lastStatus],
      ]);
      if (watchdogMs !== null && timer === null) {
        timer = setInterval(beat, Math.max(1, Math.floor(watchdogMs / 2)));
        timer.unref();
        beat();
      }
    },
    status: setStatus,
    stopping(status) {
      if (timer) clearInterval(timer);
      timer = null;
      if (stoppingSent) return;
      stoppingSent = true;
      emit(
        status
          ? [
              ['STOPPING', '1'],
              ['STATUS', oneLine(status)],
            ]
          : [['STOPPING', '1']],
      );
    },
    close() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}

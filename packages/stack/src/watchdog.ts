/**
 * The dev supervisor's side of the service watchdog (what systemd's `WatchdogSec=` does for the
 * installed units): each service gets a pipe on descriptor 3 (`VIGIL_NOTIFY_FD=3`) and the period
 * (`WATCHDOG_USEC`); the services' notifier (shared-types/node sd-notify.ts) writes the same
 * assignments it would send to systemd, one a line. From `READY=1` on, a service that sends no
 * `WATCHDOG=1` within the period, or sends `WATCHDOG=trigger`, has expired: the supervisor kills
 * it and its exit takes the restart policy's backoff like any other.
 */
import type { Readable } from 'node:stream';

/** The period given to each service unless --watchdog says otherwise (the units' WatchdogSec=20). */
export const WATCHDOG_MS = 20_000;

/** The environment that gives a child the pipe and the period; none of a manager above vigil's. */
export function watchdogEnv(base: NodeJS.ProcessEnv, watchdogMs: number): NodeJS.ProcessEnv {
  const { NOTIFY_SOCKET: _s, WATCHDOG_USEC: _u, WATCHDOG_PID: _p, VIGIL_NOTIFY_FD: _f, ...env } = base;
  return watchdogMs > 0 ? { ...env, VIGIL_NOTIFY_FD: '3', WATCHDOG_USEC: String(watchdogMs * 1000) } : env;
}

/** One service's watchdog: fed by its pipe, checked by the supervisor's timer. */
export class ServiceWatchdog {
  private armed = false;
  private lastBeat = 0;
  private triggered: string | null = null;
  private fired = false;
  /** The last STATUS= it sent. */
  status: string | null = null;

  constructor(
    private readonly periodMs: number,
    pipe: Readable | null | undefined,
  ) {
    if (!pipe) return;
    let buf = '';
    pipe.setEncoding('utf8');
    pipe.on('error', () => {});
    pipe.on('data', (chunk: string) => {
      buf += chunk;
      let i = buf.indexOf('\n');
      while (i >= 0) {
        this.take(buf.slice(0, i));
        buf = buf.slice(i + 1);
        i = buf.indexOf('\n');
      }
      if (buf.length > 4096) buf = ''; // a line that long is not ours
    });
  }

  /** One assignment from the service. */
  take(line: string, now = Date.now()): void {
    const eq = line.indexOf('=');
    if (eq < 0) return;
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (key === 'READY' && value === '1') {
      this.armed = true;
      this.lastBeat = now;
    } else if (key === 'WATCHDOG' && value === '1') {
      this.lastBeat = now;
    } else if (key === 'WATCHDOG' && value === 'trigger') {
      this.triggered = this.status ?? 'the service triggered its watchdog';
    } else if (key === 'STATUS') {
      this.status = value;
    } else if (key === 'STOPPING' && value === '1') {
      this.armed = false;
    }
  }

  /** Why the watchdog has expired (once), or null. */
  expired(now = Date.now()): string | null {
    if (this.fired || !this.armed || this.periodMs <= 0) return null;
    let why: string | null = null;
    if (this.triggered !== null) why = `it triggered its watchdog: ${this.triggered}`;
    else if (now - this.lastBeat > this.periodMs) {
      why = `no WATCHDOG=1 for ${Math.round((now - this.lastBeat) / 1000)} s (period ${this.periodMs / 1000} s)`;
      if (this.status) why += `; its last status: ${this.status}`;
    }
    if (why !== null) this.fired = true;
    return why;
  }
}

/**
 * One service lifecycle for the long-running services (the messaging daemon, the inference server,
 * the relay); each `start(config)` is a short assembly of it:
 *
 * 1. open resources in order (`open`, `own`): each registers how it is closed;
 * 2. listen on every listener (`listen`): a failure closes the listeners already bound and unwinds
 *    every resource opened so far, in reverse order, then rejects with the `ListenError` (exit 1);
 * 3. log `listening` (`listening`), once per binding; the state goes from `loading` to `serving`
 *    when the service can serve (at once, or once a model has loaded: `serving`);
 * 4. `stop(graceMs)`, once (a second call returns the same promise): state `stopping`, one
 *    `stopping` line; the listeners stop accepting; the service drains the work under way within
 *    the grace; what is left is cut; the listeners' connections are closed; the resources close
 *    in reverse order of opening, each within a time limit or its own bound (one that takes
 *    longer is left behind with a warning: the stop always ends); state `stopped`, one `stopped`
 *    line. The event loop is
 *    held while this runs, so that the process does not end half way. `stop` rejects (the binary
 *    exits 1) when a step failed; the other steps still ran.
 *
 * The exit codes (process.ts): 0 after a clean stop; 1 when a step of the stop failed, a listener
 * could not be bound, or a second signal came; 78 when start-up found bad configuration. The
 * signals themselves are the CLI's (cli.ts `stopOnSignals`), which calls the service's close.
 */
import type { Server } from 'node:net';
import { formatHostPort, type HostPort } from '../net.js';
import { closeServer, listen } from './listen.js';

/** Where a service is in its life; the inference /health and the STATUS= lines read it. */
export type ServiceState = 'loading' | 'serving' | 'stopping' | 'stopped';

export interface LifecycleLogger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
}

export interface ServiceListener {
  /** What it serves, in the ListenError's words: 'HTTP', 'TCP', 'metrics', 'mTLS'. */
  readonly what: string;
  readonly server: Server;
  readonly addr: HostPort;
  /** Nothing on it is worth draining (a metrics listener): its connections go when the stop begins. */
  readonly cutAtStop?: boolean;
}

/** What a service does at each step of its stop (all optional). */
export interface StopSteps {
  /** Right after the listeners stop accepting: end what must not hold the drain (long polls, a model load). */
  stopAccepting?(): void;
  /** Lets the work under way finish, within `graceMs` (it is cut at the bound anyway). */
  drain?(graceMs: number): Promise<unknown>;
  /** Ends what the drain left (streams, connections, aborted work); bounded by the step limit. */
  cut?(): unknown;
  /** The fields of the `stopping` line. */
  stopping?(): Record<string, unknown>;
  /** The fields of the `stopped` line. */
  stopped?(): Record<string, unknown>;
}

export interface LifecycleOptions {
  readonly logger: LifecycleLogger;
  /** The grace of the drain when `stop()` is given none. */
  readonly graceMs: number;
  /** The time limit of each step after the drain, unless a resource names its own (default 1000 ms). */
  readonly stepMs?: number;
  /** Told every change of state. */
  readonly onState?: (state: ServiceState) => void;
}

interface Owned {
  readonly name: string;
  readonly close: () => unknown;
  readonly limitMs: number | undefined;
}

/** A sleep that does not hold the event loop. */
export const unrefSleep = (ms: number): Promise<void> =>
  new Promise<void>((resolve) => {
    setTimeout(resolve, Math.max(0, ms)).unref();
  });

/** Waits until `cond()` holds, at most `ms` (polling on unref'd timers). */
export async function waitUntil(cond: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond() && Date.now() < deadline) await unrefSleep(Math.min(20, Math.max(1, deadline - Date.now())));
}

/**
 * Runs `work` for at most `ms` (Infinity: no limit, for work that bounds itself): true when it
 * ended in time, false when it was left behind. Rejects as it does.
 */
export async function within(work: unknown, ms: number): Promise<boolean> {
  if (!Number.isFinite(ms)) {
    await work;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
    timer.unref();
  });
  try {
    return await Promise.race([Promise.resolve(work).then(() => true as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

export class ServiceLifecycle {
  #state: ServiceState = 'loading';
  readonly #owned: Owned[] = [];
  readonly #listeners: ServiceListener[] = [];
  #steps: StopSteps = {};
  #stop: Promise<void> | null = null;
  readonly #stepMs: number;

  constructor(private readonly options: LifecycleOptions) {
    this.#stepMs = options.stepMs ?? 1000;
  }

  get state(): ServiceState {
    return this.#state;
  }

  /** True from the moment the stop begins. */
  get stopping(): boolean {
    return this.#state === 'stopping' || this.#state === 'stopped';
  }

  #set(state: ServiceState): void {
    this.#state = state;
    this.options.onState?.(state);
  }

  /**
   * Registers something opened: it is closed at the stop (or when start-up fails) in reverse order
   * of registration, within `limitMs` (default: the step limit; Infinity for a close that bounds
   * itself). Returns it.
   */
  own<T>(name: string, value: T, close: (value: T) => unknown, limitMs?: number): T {
    this.#owned.push({ name, close: () => close(value), limitMs });
    return value;
  }

  /** Opens a resource and registers it; when opening fails, what was opened before is closed and the error rethrown. */
  async open<T>(name: string, opener: () => T | Promise<T>, close: (value: T) => unknown, limitMs?: number) {
    let value: T;
    try {
      value = await opener();
    } catch (err) {
      await this.#unwind();
      throw err;
    }
    return this.own(name, value, close, limitMs);
  }

  /** What the service does at each step of its stop. */
  onStop(steps: StopSteps): void {
    this.#steps = steps;
  }

  /**
   * Listens on each listener given, in order (null: a listener that is off, null in the result).
   * On a failure, the listeners already bound are closed and every resource unwound; the
   * ListenError is rethrown.
   */
  async listen(listeners: readonly (ServiceListener | null)[]): Promise<(HostPort | null)[]> {
    const bound: (HostPort | null)[] = [];
    try {
      for (const l of listeners) {
        if (!l) {
          bound.push(null);
          continue;
        }
        bound.push(await listen(l.server, l.addr, l.what));
        this.#listeners.push(l);
      }
    } catch (err) {
      await Promise.all(this.#listeners.splice(0).map((l) => closeServer(l.server)));
      await this.#unwind();
      throw err;
    }
    return bound;
  }

  /** Logs `listening` with the service's fields (call it once per binding). */
  listening(fields: Record<string, unknown>): void {
    this.options.logger.info('listening', fields);
  }

  /** The service can serve now (unless its stop has begun). */
  serving(): void {
    if (this.#state === 'loading') this.#set('serving');
  }

  /** Stops the service (see the module's comment); the same promise for every call. */
  stop(graceMs = this.options.graceMs): Promise<void> {
    this.#stop ??= (async () => {
      // Every wait below is on unref'd timers: once the listeners are closed nothing else may hold
      // the event loop, and the process would end in the middle of its stop. This does.
      const hold = setInterval(() => {}, 1000);
      try {
        await this.#stopSteps(graceMs);
      } finally {
        clearInterval(hold);
      }
    })();
    return this.#stop;
  }

  async #stopSteps(graceMs: number): Promise<void> {
    const steps = this.#steps;
    const logger = this.options.logger;
    this.#set('stopping');
    logger.info('stopping', { graceMs, ...steps.stopping?.() });
    const closed = this.#listeners.map((l) => closeServer(l.server));
    for (const { server, cutAtStop } of this.#listeners) {
      if (cutAtStop) cutConnections(server);
      else (server as Server & { closeIdleConnections?: () => void }).closeIdleConnections?.();
    }
    const errors: unknown[] = [];
    const step = async (name: string, work: () => unknown, ms: number) => {
      try {
        if (!(await within(work(), ms))) logger.warn('stop step took too long; left behind', { step: name, ms });
      } catch (err) {
        errors.push(err);
        logger.warn('stop step failed', { step: name, error: String((err as Error)?.message ?? err) });
      }
    };
    await step('stop accepting', () => steps.stopAccepting?.(), this.#stepMs);
    await step('drain', () => steps.drain?.(graceMs), graceMs + this.#stepMs);
    await step('cut', () => steps.cut?.(), this.#stepMs);
    for (const { server } of this.#listeners) cutConnections(server);
    await step('close listeners', () => Promise.all(closed), this.#stepMs);
    for (const r of this.#owned.splice(0).reverse()) await step(r.name, r.close, r.limitMs ?? this.#stepMs);
    this.#set('stopped');
    logger.info('stopped', { ...steps.stopped?.() });
    if (errors.length > 0) throw errors[0];
  }

  /** Closes what was opened, in reverse order (start-up failed); errors are the first one's to tell. */
  async #unwind(): Promise<void> {
    for (const r of this.#owned.splice(0).reverse()) {
      try {
        await within(r.close(), r.limitMs ?? this.#stepMs);
      } catch (err) {
        this.options.logger.warn('closing after a failed start failed', { step: r.name, error: String(err) });
      }
    }
    this.#set('stopped');
  }
}

/** Drops every connection of an HTTP server (a net.Server has none of its own to drop). */
function cutConnections(server: Server): void {
  (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
}

/** The `listening` field of an address: `HOST:PORT`, or `off`. */
export const listenField = (addr: HostPort | null): string => (addr ? formatHostPort(addr) : 'off');

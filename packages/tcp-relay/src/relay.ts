import { createServer, type Server, type Socket } from 'node:net';
import { formatHostPort, type HostPort } from '@vigil/shared-types';
import { listen } from '@vigil/shared-types/node';
import { SourceBudget } from './budget.js';
import { allowed } from './cidr.js';
import type { RelayConfig } from './config.js';
import { BindError } from './errors.js';
import { MethodFilter } from './filter.js';
import { Pair } from './pair.js';

export type { RelayConfig } from './config.js';

export type RelayState = 'waiting' | 'listening' | 'closed';

export interface RelayHandle {
  state(): RelayState;
  /** The bound address while listening (the real port when 0 was asked for). */
  address(): HostPort | null;
  readonly stats: {
    accepted: number;
    refused: number;
    active: number;
    refusedMethods: Record<string, number>;
    /** Requests refused for naming a file on the host, by parameter. */
    refusedParams: Record<string, number>;
  };
  /** Resolves when the relay is listening (at once if it is). */
  listening(): Promise<HostPort>;
  close(): Promise<void>;
}

/** Errors that mean "this address is not on the host (yet)". */
const ABSENT = new Set(['EADDRNOTAVAIL', 'EINVAL', 'ENOTFOUND', 'EAI_AGAIN']);

/** True when the host has the address: a bind on a free port of it succeeds. */
function addressPresent(host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(!ABSENT.has(err.code ?? '')));
    probe.listen({ host, port: 0, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/**
 * Starts the relay. Resolves at once, bound or not: a listen address that is not on the host yet
 * (the VM is not running) is waited for; one that goes away is noticed and waited for again.
 * Rejects with BindError for a failure that waiting cannot fix.
 */
export async function startRelay(config: RelayConfig): Promise<RelayHandle> {
  const log = config.logger;
  const filter = config.refuse
    ? new MethodFilter(config.refuse, { refuseFilePaths: config.allowFileParams !== true })
    : null;
  const stats = {
    accepted: 0,
    refused: 0,
    active: 0,
    refusedMethods: {} as Record<string, number>,
    refusedParams: {} as Record<string, number>,
  };
  const connections = new Set<Pair>();
  const budget = new SourceBudget(config.maxBytesPerMinute, log);
  let server: Server | null = null;
  let bound: HostPort | null = null;
  let state: RelayState = 'waiting';
  let timer: NodeJS.Timeout | null = null;
  /** The last bind problem logged (an error code), so that each is said once. */
  let problem = '';
  let waiters: ((a: HostPort) => void)[] = [];

  const onConnection = (client: Socket) => {
    const source = `${client.remoteAddress}:${client.remotePort}`;
    if (!allowed(client.remoteAddress, config.allow)) {
      stats.refused++;
      client.destroy();
      log.warn('connection refused', { source, reason: 'source not allowed' });
      return;
    }
    if (connections.size >= config.maxConnections) {
      stats.refused++;
      client.destroy();
      log.warn('connection refused', { source, reason: 'connection limit', limit: config.maxConnections });
      return;
    }
    stats.accepted++;
    const host = (client.remoteAddress ?? '?').replace(/^::ffff:(?=\d+\.)/, '');
    const pair = new Pair(client, source, config, filter, budget, host, (p) => {
      connections.delete(p);
      budget.sweep();
      stats.active = connections.size;
      for (const [m, n] of Object.entries(p.refused)) stats.refusedMethods[m] = (stats.refusedMethods[m] ?? 0) + n;
      for (const [k, n] of Object.entries(p.refusedParams)) stats.refusedParams[k] = (stats.refusedParams[k] ?? 0) + n;
    });
    connections.add(pair);
    stats.active = connections.size;
  };

  /** While waiting for the address, the retry timer is all that keeps the process alive. */
  const schedule = (fn: () => void, ms: number, keepAlive: boolean) => {
    timer = setTimeout(fn, ms);
    if (!keepAlive) timer.unref();
  };

  /** Binds, or waits for the address. Only the first attempt may reject. */
  const tryBind = async (first: boolean): Promise<void> => {
    if (state === 'closed') return;
    const s = createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    try {
      bound = await listen(s, config.listen, 'guests');
    } catch (e) {
      // The system's error, under the shared ListenError: its code tells absent from broken.
      const err = ((e as Error).cause ?? e) as NodeJS.ErrnoException;
      if (!ABSENT.has(err.code ?? '') && first) throw new BindError(config.listen, err);
      // Said once per problem, not at every retry.
      if (problem !== err.code) {
        problem = err.code ?? 'EBIND';
        if (ABSENT.has(problem)) {
          log.warn('listen address not on this host yet; waiting for it', {
            listen: formatHostPort(config.listen),
            code: problem,
          });
        } else {
          log.error('cannot listen; retrying', {
            listen: formatHostPort(config.listen),
            error: new BindError(config.listen, err).message,
          });
        }
      }
      schedule(() => void tryBind(false), config.bindRetryMs, true);
      return;
    }
    if ((state as RelayState) === 'closed') {
      s.close();
      return;
    }
    server = s;
    state = 'listening';
    problem = '';
    log.info('listening', {
      listen: formatHostPort(bound),
      target: formatHostPort(config.target),
      filter: config.refuse ?? 'off',
      maxBytesPerMinute: config.maxBytesPerMinute,
      fileParams: config.refuse === null ? 'off' : config.allowFileParams === true ? 'allowed' : 'refused',
    });
    for (const w of waiters.splice(0)) w(bound);
    schedule(watch, config.watchIntervalMs, false);
  };

  /** The link address goes away when the VM stops: then close and wait for it again. */
  const watch = async () => {
    if (state !== 'listening' || !bound) return;
    if (await addressPresent(bound.host)) {
      if (state === 'listening') schedule(watch, config.watchIntervalMs, false);
      return;
    }
    if (state !== 'listening') return;
    log.warn('listen address went away; closing and waiting for it', {
      listen: formatHostPort(bound),
      connections: connections.size,
    });
    state = 'waiting';
    server?.close();
    server = null;
    bound = null;
    for (const p of connections) p.destroy('listen address went away');
    problem = 'EADDRNOTAVAIL';
    schedule(() => void tryBind(false), config.bindRetryMs, true);
  };

  await tryBind(true);

  return {
    state: () => state,
    address: () => bound,
    stats,
    listening: () => (bound ? Promise.resolve(bound) : new Promise((resolve) => waiters.push(resolve))),
    close: async () => {
      if (state === 'closed') return;
      state = 'closed';
      if (timer) clearTimeout(timer);
      waiters = [];
      server?.close();
      // Connections get the grace to finish what is under way, then they are cut.
      for (const p of connections) p.endGracefully();
      const deadline = Date.now() + config.shutdownGraceMs;
      while (connections.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const p of connections) p.destroy('shutdown');
      log.info('stopped', stats);
    },
  };
}

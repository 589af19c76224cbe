import { createServer, type Server, type Socket } from 'node:net';
import { formatHostPort, type HostPort } from '@vigil/shared-types';
import { listen, ServiceLifecycle, type ServiceState, waitUntil } from '@vigil/shared-types/node';
import { SourceBudget } from './budget.js';
import { allowed } from './cidr.js';
import type { RelayConfig } from './config.js';
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
 * Starts the relay (see shared-types lifecycle.ts for the stop). Resolves at once, bound or not: a
 * listen address that is not on the host yet (the VM is not running) is waited for; one that goes
 * away is noticed and waited for again. Rejects with ListenError for a failure that waiting cannot fix.
 */
export async function startRelay(config: RelayConfig, onState?: (state: ServiceState) => void): Promise<RelayHandle> {
  const log = config.logger;
  const life = new ServiceLifecycle({ logger: log, graceMs: config.shutdownGraceMs, onState });
  const stats = {
    accepted: 0,
    refused: 0,
    active: 0,
    refusedMethods: {} as Record<string, number>,
    refusedParams: {} as Record<string, number>,
  };
  const connections = new Set<Pair>();
  const onConnection = connectionHandler(config, connections, stats);
  let server: Server | null = null;
  let bound: HostPort | null = null;
  let timer: NodeJS.Timeout | null = null;
  /** The last bind problem logged (an error code), so that each is said once. */
  let problem = '';
  let waiters: ((a: HostPort) => void)[] = [];

  /** While waiting for the address, the retry timer is all that keeps the process alive. */
  const schedule = (fn: () => void, ms: number, keepAlive: boolean) => {
    timer = setTimeout(fn, ms);
    if (!keepAlive) timer.unref();
  };

  /** Binds, or waits for the address. Only the first attempt may reject. */
  const tryBind = async (first: boolean): Promise<void> => {
    if (life.stopping) return;
    const s = createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    try {
      bound = await listen(s, config.listen, 'guests');
    } catch (e) {
      // The system's error is the ListenError's cause: its code tells absent from broken.
      const code = (((e as Error).cause ?? e) as NodeJS.ErrnoException).code ?? 'ELISTEN';
      if (!ABSENT.has(code) && first) throw e;
      // Said once per problem, not at every retry.
      if (problem !== code) {
        problem = code;
        if (ABSENT.has(code)) {
          log.warn('listen address not on this host yet; waiting for it', {
            listen: formatHostPort(config.listen),
            code,
          });
        } else {
          log.error('cannot listen; retrying', { listen: formatHostPort(config.listen), error: (e as Error).message });
        }
      }
      schedule(() => void tryBind(false), config.bindRetryMs, true);
      return;
    }
    if (life.stopping) {
      s.close();
      return;
    }
    server = s;
    problem = '';
    // Once per binding: the first, and each time the address comes back.
    life.listening({
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
    if (life.stopping || !bound) return;
    if (await addressPresent(bound.host)) {
      if (!life.stopping) schedule(watch, config.watchIntervalMs, false);
      return;
    }
    if (life.stopping) return;
    log.warn('listen address went away; closing and waiting for it', {
      listen: formatHostPort(bound),
      connections: connections.size,
    });
    server?.close();
    server = null;
    bound = null;
    for (const p of connections) p.destroy('listen address went away');
    problem = 'EADDRNOTAVAIL';
    schedule(() => void tryBind(false), config.bindRetryMs, true);
  };

  await tryBind(true);
  life.serving();
  life.onStop({
    stopAccepting: () => {
      if (timer) clearTimeout(timer);
      waiters = [];
      server?.close();
      // Connections get the grace to finish what is under way, then they are cut.
      for (const p of connections) p.endGracefully();
    },
    drain: (graceMs) => waitUntil(() => connections.size === 0, graceMs),
    cut: () => {
      for (const p of connections) p.destroy('shutdown');
    },
    stopping: () => ({ connections: connections.size }),
    stopped: () => stats,
  });

  return {
    state: () => (life.stopping ? 'closed' : bound ? 'listening' : 'waiting'),
    address: () => bound,
    stats,
    listening: () => (bound ? Promise.resolve(bound) : new Promise((resolve) => waiters.push(resolve))),
    close: () => life.stop(),
  };
}

/** Accepts a guest connection (allowlist, connection limit) and pairs it with the target. */
function connectionHandler(config: RelayConfig, connections: Set<Pair>, stats: RelayHandle['stats']) {
  const log = config.logger;
  const filter = config.refuse
    ? new MethodFilter(config.refuse, { refuseFilePaths: config.allowFileParams !== true })
    : null;
  const budget = new SourceBudget(config.maxBytesPerMinute, log);
  return (client: Socket) => {
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
}

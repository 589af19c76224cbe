import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import {
  type Frame,
  failure,
  formatHostPort,
  type HostPort,
  LineFramer,
  type Logger,
  RpcErrorCode,
  rpcError,
} from '@vigil/shared-types';
import { allowed, type Cidr } from './cidr.js';
import { MethodFilter, type Verdict } from './filter.js';

export interface RelayConfig {
  readonly listen: HostPort;
  readonly target: HostPort;
  /** Sources allowed to connect. */
  readonly allow: readonly Cidr[];
  readonly maxConnections: number;
  readonly connectTimeoutMs: number;
  /** 0: no idle timeout. */
  readonly idleTimeoutMs: number;
  /** Methods refused from the guest; null: no filter, a pure byte relay. */
  readonly refuse: readonly string[] | null;
  readonly maxLineBytes: number;
  /** While the listen address is absent, a bind is tried this often. */
  readonly bindRetryMs: number;
  /** While bound, the listen address is checked this often (it goes away with the VM). */
  readonly watchIntervalMs: number;
  /** On close, connections get this long before they are cut. */
  readonly shutdownGraceMs: number;
  readonly logger: Logger;
}

export type RelayState = 'waiting' | 'listening' | 'closed';

export interface RelayHandle {
  state(): RelayState;
  /** The bound address while listening (the real port when 0 was asked for). */
  address(): HostPort | null;
  readonly stats: { accepted: number; refused: number; active: number; refusedMethods: Record<string, number> };
  /** Resolves when the relay is listening (at once if it is). */
  listening(): Promise<HostPort>;
  close(): Promise<void>;
}

/** A bind failure that waiting cannot fix (port in use, permission): the CLI exits 1 with it. */
export class BindError extends Error {
  readonly code: string;
  constructor(addr: HostPort, cause: NodeJS.ErrnoException) {
    const reason =
      cause.code === 'EADDRINUSE'
        ? 'address already in use'
        : cause.code === 'EACCES'
          ? 'permission denied'
          : (cause.message ?? String(cause));
    super(`cannot listen on ${formatHostPort(addr)}: ${reason}`);
    this.name = 'BindError';
    this.code = cause.code ?? 'EBIND';
  }
}

/** Errors that mean "this address is not on the host (yet)". */
const ABSENT = new Set(['EADDRNOTAVAIL', 'EINVAL', 'ENOTFOUND', 'EAI_AGAIN']);

function bind(server: Server, addr: HostPort): Promise<HostPort> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(err);
    };
    const onListening = () => {
      server.off('error', onError);
      const a = server.address() as { address: string; port: number };
      resolve({ host: a.address, port: a.port });
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen({ host: addr.host, port: addr.port, exclusive: true });
  });
}

/** True when the host has the address: a bind on a free port of it succeeds. */
function addressPresent(host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(!ABSENT.has(err.code ?? '')));
    probe.listen({ host, port: 0, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

const LF = Buffer.from('\n');
const CRLF = Buffer.from('\r\n');

/**
 * Starts the relay. Resolves at once, bound or not: a listen address that is not on the host yet
 * (the VM is not running) is waited for; one that goes away is noticed and waited for again.
 * Rejects with BindError for a failure that waiting cannot fix.
 */
export async function startRelay(config: RelayConfig): Promise<RelayHandle> {
  const log = config.logger;
  const filter = config.refuse ? new MethodFilter(config.refuse) : null;
  const stats = { accepted: 0, refused: 0, active: 0, refusedMethods: {} as Record<string, number> };
  const connections = new Set<Pair>();
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
    const pair = new Pair(client, source, config, filter, (p) => {
      connections.delete(p);
      stats.active = connections.size;
      for (const [m, n] of Object.entries(p.refused)) stats.refusedMethods[m] = (stats.refusedMethods[m] ?? 0) + n;
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
      bound = await bind(s, config.listen);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
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

/** A side that closed lets the other flush its writes for at most this long before it is cut. */
const LINGER_MS = 5000;

/** One guest connection and its connection to the target. */
class Pair {
  private upstream: Socket | null = null;
  private connected = false;
  private readonly opened = Date.now();
  private bytesIn = 0;
  private bytesOut = 0;
  private reason = '';
  private finished = false;
  private clientClosed = false;
  private upstreamClosed = false;
  private linger: NodeJS.Timeout | null = null;
  private readonly framer: LineFramer | null;
  /** The relay's own replies wait for a line boundary in the target's byte stream. */
  private injections: Buffer[] = [];
  private atBoundary = true;
  readonly refused: Record<string, number> = {};

  constructor(
    private readonly client: Socket,
    private readonly source: string,
    private readonly config: RelayConfig,
    private readonly filter: MethodFilter | null,
    private readonly onClose: (p: Pair) => void,
  ) {
    this.framer = filter ? new LineFramer({ maxLineBytes: config.maxLineBytes }) : null;
    client.setNoDelay(true);
    client.on('error', (err) => this.destroy(`client error: ${err.message}`));
    client.on('close', () => {
      this.clientClosed = true;
      this.closed('client closed', this.upstream);
    });
    if (config.idleTimeoutMs > 0) {
      client.setTimeout(config.idleTimeoutMs, () => this.destroy('idle timeout'));
    }
    config.logger.info('connection opened', { source });
    this.connect();
  }

  private connect(): void {
    const { target, connectTimeoutMs } = this.config;
    const up = netConnect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true });
    this.upstream = up;
    const timer = setTimeout(
      () => this.destroy(`target did not accept within ${connectTimeoutMs} ms`),
      connectTimeoutMs,
    );
    up.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      this.destroy(this.connected ? `target error: ${err.message}` : `target unreachable: ${err.code ?? err.message}`);
    });
    up.on('close', () => {
      clearTimeout(timer);
      this.upstreamClosed = true;
      this.closed('target closed', this.client);
    });
    up.once('connect', () => {
      clearTimeout(timer);
      if (this.finished) return;
      this.connected = true;
      if (this.config.idleTimeoutMs > 0) up.setTimeout(this.config.idleTimeoutMs, () => this.destroy('idle timeout'));
      this.wire(up);
      this.client.resume();
    });
  }

  private wire(up: Socket): void {
    const client = this.client;
    // Target → guest: bytes unchanged, with backpressure.
    up.on('data', (chunk: Buffer) => {
      this.bytesOut += chunk.length;
      if (this.injections.length > 0) this.writeWithInjections(chunk);
      else {
        if (chunk.length > 0) this.atBoundary = chunk[chunk.length - 1] === 0x0a;
        if (!client.write(chunk)) up.pause();
      }
    });
    client.on('drain', () => up.resume());
    up.on('end', () => {
      this.flushInjections();
      client.end(); // half-close forwarded
    });
    // Guest → target.
    client.on('data', (chunk: Buffer) => {
      this.bytesIn += chunk.length;
      const ok = this.framer ? this.forwardFiltered(chunk, up) : up.write(chunk);
      if (!ok) client.pause();
    });
    up.on('drain', () => client.resume());
    client.on('end', () => {
      // The guest's last line may lack its newline: it goes on as it came.
      if (this.framer) {
        const out: Uint8Array[] = [];
        this.collectFrames(this.framer.end(), out, false);
        this.write(up, out);
      }
      up.end(); // half-close forwarded: the guest still gets every reply
    });
  }

  /**
   * Guest → target through the filter. A line left incomplete by the previous read is finished
   * through the framer with this chunk's bytes up to its first newline; from there the chunk is
   * at a line boundary and, when small enough that none of its lines can be oversize, goes on in
   * byte ranges: only its lines with a `\u` escape are cut out and judged (see scanChunk). A chunk
   * holding a refused name goes through the framer, line by line.
   */
  private forwardFiltered(chunk: Buffer, up: Socket): boolean {
    const framer = this.framer!;
    const out: Uint8Array[] = [];
    let body = chunk;
    if (!framer.idle) {
      const nl = chunk.indexOf(0x0a);
      const head = nl < 0 ? chunk : chunk.subarray(0, nl + 1);
      this.collectFrames(framer.push(head), out, true, head);
      body = chunk.subarray(head.length);
    }
    if (body.length > 0) {
      const scan = body.length <= this.config.maxLineBytes ? this.filter!.scanChunk(body) : null;
      if (scan === null) this.collectFrames(framer.push(body), out, true, body);
      else {
        for (const part of scan.parts) {
          if (part.kind === 'clean') out.push(part.bytes);
          else if (this.passes(this.filter!.judge(part.line, true))) out.push(part.line, part.newline);
        }
        if (scan.rest.length > 0) framer.push(scan.rest);
      }
    }
    return this.write(up, out);
  }

  /** Writes the parts in order: one write, or one writev of the ranges (no copy). */
  private write(up: Socket, out: Uint8Array[]): boolean {
    if (out.length <= 1) return out.length === 0 || up.write(out[0]!);
    up.cork();
    let ok = true;
    for (const b of out) ok = up.write(b);
    up.uncork();
    return ok;
  }

  /** True for a line to forward; a refused one is counted, logged and answered. */
  private passes(verdict: Verdict): boolean {
    if (verdict.forward) return true;
    for (const m of verdict.refused) this.refused[m] = (this.refused[m] ?? 0) + 1;
    this.config.logger.warn('method refused', { source: this.source, methods: verdict.refused });
    if (verdict.reply) this.inject(verdict.reply);
    return false;
  }

  /**
   * Adds to `out` the lines the filter lets through, in order; answers the others. The refused
   * names are searched for once in `chunk` (what was read), not in each line of it: a line that
   * lies inside a chunk without them holds none either. A line that began in an earlier chunk is
   * a copy, not inside `chunk`, and is searched on its own.
   */
  private collectFrames(frames: Frame[], out: Uint8Array[], terminated: boolean, chunk?: Buffer): void {
    const clean = chunk !== undefined && frames.length > 1 && this.filter!.noRefusedName(chunk);
    for (const frame of frames) {
      if (frame.kind === 'oversize') {
        this.inject(
          failure(
            null,
            rpcError(RpcErrorCode.INVALID_REQUEST, `Request too large: a line may hold at most ${frame.limit} bytes`),
          ),
        );
        continue;
      }
      const inside =
        clean &&
        frame.bytes.buffer === chunk.buffer &&
        frame.bytes.byteOffset >= chunk.byteOffset &&
        frame.bytes.byteOffset + frame.bytes.byteLength <= chunk.byteOffset + chunk.byteLength;
      if (this.passes(this.filter!.judge(frame.bytes, inside))) {
        out.push(frame.bytes);
        if (terminated) out.push(frame.crlf ? CRLF : LF);
      }
    }
  }

  /** A reply of the relay's own, written between two of the target's lines. */
  private inject(reply: unknown): void {
    this.injections.push(Buffer.from(`${JSON.stringify(reply)}\n`));
    if (this.atBoundary) this.flushInjections();
  }

  private flushInjections(): void {
    if (this.injections.length === 0 || this.client.destroyed || this.client.writableEnded) return;
    this.client.write(Buffer.concat(this.injections));
    this.injections = [];
    this.atBoundary = true;
  }

  private writeWithInjections(chunk: Buffer): void {
    const nl = chunk.lastIndexOf(0x0a);
    if (nl < 0) {
      this.atBoundary = false;
      if (!this.client.write(chunk)) this.upstream?.pause();
      return;
    }
    this.client.write(chunk.subarray(0, nl + 1));
    this.atBoundary = true;
    this.flushInjections();
    const rest = chunk.subarray(nl + 1);
    if (rest.length > 0) {
      this.atBoundary = false;
      if (!this.client.write(rest)) this.upstream?.pause();
    }
  }

  /** One side closed: the other may finish writing what it has, then it is cut. */
  private closed(reason: string, other: Socket | null): void {
    this.reason ||= reason;
    const upstreamDone = this.upstreamClosed || !this.connected;
    if (this.clientClosed && upstreamDone) {
      this.finish();
      return;
    }
    if (other && !other.destroyed) {
      // Nobody is left to read what the other side would send: let it flush what it has
      // already been given, then cut it (at the latest after LINGER_MS).
      other.end();
      if (other.writableFinished) other.destroy();
      else other.once('finish', () => other.destroy());
      this.linger ??= setTimeout(() => this.destroy(this.reason), LINGER_MS);
      this.linger.unref();
    } else {
      this.finish();
    }
  }

  /** Shutdown: stop sending to the target; the connection ends when both sides are done. */
  endGracefully(): void {
    this.upstream?.end();
  }

  /** Cuts both sides at once (errors, timeouts, shutdown). */
  destroy(reason: string): void {
    this.reason ||= reason;
    this.client.destroy();
    this.upstream?.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.linger) clearTimeout(this.linger);
    this.client.destroy();
    this.upstream?.destroy();
    const record: Record<string, unknown> = {
      source: this.source,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      durationMs: Date.now() - this.opened,
      reason: this.reason,
    };
    if (Object.keys(this.refused).length > 0) record.refusedMethods = this.refused;
    this.config.logger.info('connection closed', record);
    this.onClose(this);
  }
}

import { connect as netConnect, type Socket } from 'node:net';
import { requestTooLarge } from '@vigil/shared-types';
import type { SourceBudget } from './budget.js';
import type { RelayConfig } from './config.js';
import type { MethodFilter } from './filter.js';
import { GuestLines, type Refusal } from './guest-lines.js';

/** What a connection needs of the relay's configuration. */
export type PairConfig = Pick<
  RelayConfig,
  'target' | 'sourceAddress' | 'connectTimeoutMs' | 'idleTimeoutMs' | 'maxLineBytes' | 'logger'
>;

/**
 * One relayed connection: the guest's socket and its own connection to the target. Bytes go both
 * ways with backpressure, half-close is forwarded, idle and connect timeouts apply, and with a
 * filter the guest's lines go through it (refused ones answered by the relay, between two of the
 * target's lines). It reports its end once, with what it carried, to `onClose`.
 */

/** A side that closed lets the other flush its writes for at most this long before it is cut. */
const LINGER_MS = 5000;

/** One guest connection and its connection to the target. */
export class Pair {
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
  private readonly lines: GuestLines | null;
  /** The relay's own replies wait for a line boundary in the target's byte stream. */
  private injections: Buffer[] = [];
  private atBoundary = true;
  /** Not read until this timer ends: the guest's source is over its byte rate. */
  private throttle: NodeJS.Timeout | null = null;
  readonly refused: Record<string, number> = {};
  /** File parameters refused, by name. */
  readonly refusedParams: Record<string, number> = {};

  constructor(
    private readonly client: Socket,
    private readonly source: string,
    private readonly config: PairConfig,
    filter: MethodFilter | null,
    /** The guest's share of bytes per minute, by source address. */
    private readonly budget: SourceBudget,
    /** The source address (without the port) the share is counted for. */
    private readonly sourceHost: string,
    private readonly onClose: (p: Pair) => void,
  ) {
    this.lines = filter
      ? new GuestLines(
          filter,
          config.maxLineBytes,
          (r) => this.refuse(r),
          (limit) => this.inject(requestTooLarge('line', limit)),
        )
      : null;
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
    const { target, connectTimeoutMs, sourceAddress } = this.config;
    const up = netConnect({
      host: target.host,
      port: target.port,
      allowHalfOpen: true,
      noDelay: true,
      ...(sourceAddress ? { localAddress: sourceAddress } : {}),
    });
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
      const ok = this.lines ? this.write(up, this.lines.push(chunk)) : up.write(chunk);
      if (!ok) client.pause();
      const wait = this.budget.take(this.sourceHost, chunk.length);
      if (wait > 0 && !this.throttle) {
        client.pause();
        this.throttle = setTimeout(() => {
          this.throttle = null;
          if (!up.writableNeedDrain) client.resume();
        }, wait);
      }
    });
    up.on('drain', () => {
      if (!this.throttle) client.resume();
    });
    client.on('end', () => {
      // The guest's last line may lack its newline: it goes on as it came.
      if (this.lines) this.write(up, this.lines.end());
      up.end(); // half-close forwarded: the guest still gets every reply
    });
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

  /** A line the filter refused: counted, logged and answered. */
  private refuse(r: Refusal): void {
    for (const m of r.refused) this.refused[m] = (this.refused[m] ?? 0) + 1;
    for (const p of r.paths) this.refusedParams[p] = (this.refusedParams[p] ?? 0) + 1;
    if (r.refused.length > 0) this.config.logger.warn('method refused', { source: this.source, methods: r.refused });
    if (r.paths.length > 0) this.config.logger.warn('file path refused', { source: this.source, params: r.paths });
    if (r.unreadable) this.config.logger.warn('unreadable request refused', { source: this.source });
    if (r.reply) this.inject(r.reply);
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
    if (this.throttle) clearTimeout(this.throttle);
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
    if (Object.keys(this.refusedParams).length > 0) record.refusedParams = this.refusedParams;
    this.config.logger.info('connection closed', record);
    this.onClose(this);
  }
}

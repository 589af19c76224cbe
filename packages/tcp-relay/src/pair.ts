import { connect as netConnect, type Socket } from 'node:net';
import { type Frame, LineFramer, requestTooLarge } from '@vigil/shared-types';
import type { MethodFilter, Verdict } from './filter.js';
import type { RelayConfig } from './relay.js';

/** What a connection needs of the relay's configuration. */
export type PairConfig = Pick<RelayConfig, 'target' | 'connectTimeoutMs' | 'idleTimeoutMs' | 'maxLineBytes' | 'logger'>;

/**
 * One relayed connection: the guest's socket and its own connection to the target. Bytes go both
 * ways with backpressure, half-close is forwarded, idle and connect timeouts apply, and with a
 * filter the guest's lines go through it (refused ones answered by the relay, between two of the
 * target's lines). It reports its end once, with what it carried, to `onClose`.
 */

const LF = Buffer.from('\n');
const CRLF = Buffer.from('\r\n');
const CR = Buffer.from('\r');

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
  private readonly framer: LineFramer | null;
  /** The relay's own replies wait for a line boundary in the target's byte stream. */
  private injections: Buffer[] = [];
  private atBoundary = true;
  readonly refused: Record<string, number> = {};

  constructor(
    private readonly client: Socket,
    private readonly source: string,
    private readonly config: PairConfig,
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
        this.inject(requestTooLarge('line', frame.limit));
        continue;
      }
      const inside =
        clean &&
        frame.bytes.buffer === chunk.buffer &&
        frame.bytes.byteOffset >= chunk.byteOffset &&
        frame.bytes.byteOffset + frame.bytes.byteLength <= chunk.byteOffset + chunk.byteLength;
      if (this.passes(this.filter!.judge(frame.bytes, inside))) {
        out.push(frame.bytes);
        if (terminated) out.push(frame.end === 'crlf' ? CRLF : frame.end === 'cr' ? CR : LF);
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

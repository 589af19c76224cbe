import { createServer, type Server, type Socket } from 'node:net';
import {
  decodeLine,
  type Frame,
  failure,
  LineFramer,
  type Logger,
  parseMessage,
  RECEIVE_NOTIFICATION,
  RpcErrorCode,
  requestTooLarge,
  rpcError,
} from '@vigil/shared-types';
import type { ReceiveMode } from '../config.js';
import { type ConsumerHandle, RELAY_CONSUMER, TCP_CONSUMER } from '../consumers.js';
import type { Inbox } from '../inbox.js';
import { callContext, type Dispatcher, type Invoke, isPending, type Reply } from '../rpc.js';

/** Stop reading a connection whose peer does not read its replies past this many buffered bytes. */
const WRITE_HIGH_WATER = 1024 * 1024;
/** Stop reading a connection with this many calls under way. */
const MAX_IN_FLIGHT = 256;
/** Events written per pull from the inbox: at most this many, and this many bytes (past the first). */
const PULL = 256;
const PULL_BYTES = 256 * 1024;

export interface TcpOptions {
  readonly maxLineBytes: number;
  readonly maxConnections: number;
  /** Most connections from one source address. */
  readonly maxConnectionsPerSource: number;
  /** A connection that is not receiving and sent nothing this long is closed; 0: never. */
  readonly idleTimeoutMs: number;
  readonly receiveMode: ReceiveMode;
  readonly inbox: Inbox;
  /**
   * Source addresses of the relay: every connection from one is the relay consumer (held
   * messages first in on-start mode); from any other, on-start notifications start at the present.
   */
  readonly relaySources: ReadonlySet<string>;
  readonly dispatcher: Dispatcher;
  /** Calls a method for this connection (the daemon handles the receive subscriptions). */
  readonly invoke: (conn: TcpConnection) => Invoke;
  readonly logger: Logger;
}

/**
 * One client connection: newline-delimited JSON-RPC, one reply per line in one write (Nagle off),
 * in completion order; every error is a reply and the connection goes on. Incoming messages are
 * written as `receive` notifications from a cursor into the inbox, so a slow reader holds no
 * growing buffer and misses nothing while connected.
 */
export class TcpConnection {
  private readonly framer: LineFramer;
  private inFlight = 0;
  private readPaused = false;
  /** Replies are being gathered for one write at the end of this turn (see done). */
  private corked = false;
  /** on-start mode: plain notifications from this inbox position; null when not receiving. */
  private cursor: number | null = null;
  /** on-start mode from a relay source: the relay consumer. */
  private onStartConsumer: ConsumerHandle | null = null;
  /** subscribeReceive: subscription id → its cursor and consumer. */
  private readonly subscriptions = new Map<number, { cursor: number; consumer: ConsumerHandle }>();
  private nextSubscription = 0;
  private closed = false;
  private idleTimer: NodeJS.Timeout | null = null;
  /** When the peer last sent something (ms since the epoch): the idle timer checks it when it runs. */
  private lastActive = Date.now();
  private readonly onAppended = () => this.pump();
  /** The connection comes from a relay source address (see TcpOptions.relaySources). */
  readonly fromRelay: boolean;
  /** Calls a method for this connection. */
  private readonly invoke: Invoke;

  constructor(
    readonly socket: Socket,
    private readonly o: TcpOptions,
  ) {
    this.framer = new LineFramer({ maxLineBytes: o.maxLineBytes });
    this.fromRelay = o.relaySources.has(sourceOf(socket));
    const invoke = o.invoke(this);
    // A peer that closed its side waits for nothing more: a `receive` wait ends and is answered.
    const call = callContext(socket, ['end', 'close']);
    this.invoke = (method, params) => invoke(method, params, call);
    socket.setNoDelay(true);
    if (o.idleTimeoutMs > 0) this.idleTimer = setTimeout(() => this.idle(), o.idleTimeoutMs).unref();
    socket.on('data', (chunk: Buffer) => {
      this.lastActive = Date.now();
      const frames = this.framer.push(chunk);
      if (frames.length === 1) {
        this.handle(frames[0]!);
        return;
      }
      // The replies answered at once to the lines of one chunk leave in one write.
      socket.cork();
      for (const frame of frames) this.handle(frame);
      socket.uncork();
    });
    socket.on('end', () => {
      // A peer that half-closes after its last request still gets the replies.
      for (const frame of this.framer.end()) this.handle(frame);
      this.endWhenIdle();
    });
    socket.on('drain', () => {
      this.updateReading();
      this.pump();
    });
    socket.on('error', () => {});
    socket.on('close', () => this.dispose());
    o.inbox.on('appended', this.onAppended);
    if (o.receiveMode === 'on-start') {
      // Only the relay's connections are a consumer here: any other gets what arrives from now on,
      // as with signal-cli, and no backlog before the answer to its first call.
      if (this.fromRelay) {
        this.onStartConsumer = o.inbox.consumer(RELAY_CONSUMER);
        this.cursor = o.inbox.heldStart(RELAY_CONSUMER);
        this.pump();
      } else this.cursor = o.inbox.head;
    }
  }

  /** The consumer a subscription of this connection is when it names none. */
  get defaultConsumer(): string {
    return this.fromRelay ? RELAY_CONSUMER : TCP_CONSUMER;
  }

  /** A receive subscription as consumer `name` (a name already checked): what is held for it, then live. */
  subscribe(name: string): number {
    const id = this.nextSubscription++;
    const cursor = this.o.inbox.heldStart(name);
    this.subscriptions.set(id, { cursor, consumer: this.o.inbox.consumer(name) });
    setImmediate(() => this.pump()); // after the reply with the id
    return id;
  }

  unsubscribe(id: number): boolean {
    const sub = this.subscriptions.get(id);
    sub?.consumer.close();
    return this.subscriptions.delete(id);
  }

  /** A consumer of notifications: on-start mode, or a receive subscription. */
  get receiving(): boolean {
    return this.cursor !== null || this.subscriptions.size > 0;
  }

  /**
   * The idle timer ran out: a connection that receives notifications, or has calls under way,
   * is not idle (it stays however quiet); any other is closed.
   */
  private idle(): void {
    if (this.closed) return;
    // The timer is not moved at each chunk (that costs on every request); it looks when it runs.
    const quiet = Date.now() - this.lastActive;
    if (quiet < this.o.idleTimeoutMs) {
      this.idleTimer = setTimeout(() => this.idle(), this.o.idleTimeoutMs - quiet).unref();
      return;
    }
    if (this.receiving || this.inFlight > 0) {
      this.idleTimer?.refresh();
      return;
    }
    this.o.logger.debug('tcp connection closed: idle', {
      remote: this.socket.remoteAddress,
      idleTimeoutS: this.o.idleTimeoutMs / 1000,
    });
    this.close();
  }

  /** The last resort: a bug in one line is logged and answered -32603; the connection and the daemon go on. */
  private handle(frame: Frame): void {
    try {
      this.handleLine(frame);
    } catch (err) {
      this.o.logger.error('request failed', { remote: this.socket.remoteAddress, error: String(err) });
      this.write(failure(null, rpcError(RpcErrorCode.INTERNAL_ERROR, 'Internal error')));
    }
  }

  private handleLine(frame: Frame): void {
    if (frame.kind === 'oversize') {
      this.write(requestTooLarge('line', frame.limit));
      return;
    }
    const text = decodeLine(frame.bytes);
    if (text === null) {
      this.write(failure(null, rpcError(RpcErrorCode.PARSE_ERROR, 'Parse error: the line is not valid UTF-8')));
      return;
    }
    const message = parseMessage(text);
    let reply: Reply | Promise<Reply>;
    try {
      reply = this.o.dispatcher.dispatch(message, this.invoke);
    } catch (err) {
      reply = Promise.reject(err);
    }
    if (!isPending(reply)) {
      if (reply !== undefined) this.write(reply);
      return;
    }
    this.inFlight++;
    this.updateReading();
    reply.then(
      (r) => this.done(r),
      (err: unknown) => {
        this.o.logger.error('dispatch failed', { error: String(err) });
        this.done(failure(null, rpcError(RpcErrorCode.INTERNAL_ERROR, 'Internal error')));
      },
    );
  }

  private done(reply: Reply): void {
    this.inFlight--;
    if (reply !== undefined) {
      // Replies that complete in one turn (the sends of one group commit) leave in one write.
      if (!this.corked) {
        this.corked = true;
        this.socket.cork();
        process.nextTick(() => {
          this.corked = false;
          this.socket.uncork();
        });
      }
      this.write(reply);
    }
    this.updateReading();
    this.endWhenIdle();
  }

  /** Writes one reply line; one that cannot be written (a bug) is logged and answered -32603 instead. */
  private write(value: unknown): void {
    if (this.closed || this.socket.destroyed || !this.socket.writable) return;
    let line: string;
    try {
      line = `${JSON.stringify(value)}\n`;
    } catch (err) {
      this.o.logger.error('request failed', { remote: this.socket.remoteAddress, error: String(err) });
      line = `${JSON.stringify(failure(null, rpcError(RpcErrorCode.INTERNAL_ERROR, 'Internal error')))}\n`;
    }
    this.socket.write(line);
  }

  /** Backpressure: read only while the peer reads and the calls under way are bounded. */
  private updateReading(): void {
    const busy = this.socket.writableLength > WRITE_HIGH_WATER || this.inFlight >= MAX_IN_FLIGHT;
    if (busy && !this.readPaused) {
      this.readPaused = true;
      this.socket.pause();
    } else if (!busy && this.readPaused) {
      this.readPaused = false;
      this.socket.resume();
    }
  }

  /** A peer that half-closed gets the replies to its last requests, then the connection ends. */
  private endWhenIdle(): void {
    if (this.inFlight === 0 && this.socket.readableEnded && !this.socket.writableEnded) this.socket.end();
  }

  /** Writes the events each receiver has not seen yet, while the socket takes them. */
  private pump(): void {
    if (this.closed) return;
    const inbox = this.o.inbox;
    while (this.socket.writableLength <= WRITE_HIGH_WATER) {
      let wrote = false;
      if (this.cursor !== null && this.cursor < inbox.head) {
        const events = inbox.after(this.cursor, PULL, PULL_BYTES);
        for (const e of events) {
          this.socket.write(`{"jsonrpc":"2.0","method":"${RECEIVE_NOTIFICATION}","params":${e.json}}\n`);
          this.cursor = e.seq;
        }
        wrote ||= events.length > 0;
        if (events.length === 0) this.cursor = inbox.head;
        else this.onStartConsumer?.wrote(this.cursor);
      }
      for (const [id, sub] of this.subscriptions) {
        if (sub.cursor >= inbox.head) continue;
        const events = inbox.after(sub.cursor, PULL, PULL_BYTES);
        for (const e of events) {
          this.socket.write(
            `{"jsonrpc":"2.0","method":"${RECEIVE_NOTIFICATION}","params":{"subscription":${id},"result":${e.json}}}\n`,
          );
        }
        sub.cursor = events.length > 0 ? events[events.length - 1]!.seq : inbox.head;
        if (events.length > 0) sub.consumer.wrote(sub.cursor);
        wrote ||= events.length > 0;
      }
      if (!wrote) return;
    }
  }

  close(): void {
    if (!this.socket.destroyed) this.socket.end();
    // A peer that does not close within a second is cut off.
    setTimeout(() => this.socket.destroy(), 1000).unref();
  }

  private dispose(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.o.inbox.off('appended', this.onAppended);
    this.onStartConsumer?.close();
    for (const sub of this.subscriptions.values()) sub.consumer.close();
  }
}

/** An IPv4 address mapped into IPv6 is the IPv4 address. */
const sourceOf = (socket: Socket): string => (socket.remoteAddress ?? '?').replace(/^::ffff:(?=\d+\.)/, '');

/**
 * The TCP listener. Fairness: at most `maxConnections` connections (more are dropped by the
 * server), and at most `maxConnectionsPerSource` from one source address, so one client cannot
 * take every slot; a refused connection is closed at once. Refusals are logged once per episode
 * (its first refusal), and the end of the episode with the count.
 */
export class TcpTransport {
  readonly server: Server;
  readonly connections = new Set<TcpConnection>();
  private readonly perSource = new Map<string, number>();
  private readonly perSourceLimit: number;
  /** Refusals of the episode under way, by source ('*' for the global limit). */
  private readonly refused = new Map<string, number>();

  constructor(private readonly o: TcpOptions) {
    this.perSourceLimit = o.maxConnectionsPerSource;
    this.server = createServer({ noDelay: true, allowHalfOpen: true }, (socket) => this.accept(socket));
    this.server.maxConnections = o.maxConnections;
    this.server.on('drop', (data) => this.refuse('*', data?.remoteAddress, 'too many connections', o.maxConnections));
  }

  private refuse(key: string, remote: string | undefined, why: string, limit: number): void {
    const n = (this.refused.get(key) ?? 0) + 1;
    this.refused.set(key, n);
    if (n === 1) this.o.logger.warn(`tcp connections refused: ${why}`, { limit, remote });
  }

  /** Ends the refusal episodes that a closed connection made room for. */
  private endEpisodes(source: string): void {
    for (const key of ['*', source]) {
      const n = this.refused.get(key);
      if (n === undefined) continue;
      this.refused.delete(key);
      this.o.logger.info('tcp connections accepted again', {
        ...(key === '*' ? {} : { remote: key }),
        refused: n,
      });
    }
  }

  private accept(socket: Socket): void {
    const source = sourceOf(socket);
    const count = this.perSource.get(source) ?? 0;
    if (count >= this.perSourceLimit) {
      socket.on('error', () => {});
      socket.destroy();
      this.refuse(source, source, 'too many connections from one source', this.perSourceLimit);
      return;
    }
    this.perSource.set(source, count + 1);
    const conn = new TcpConnection(socket, this.o);
    this.connections.add(conn);
    socket.on('close', () => {
      this.connections.delete(conn);
      const left = (this.perSource.get(source) ?? 1) - 1;
      if (left > 0) this.perSource.set(source, left);
      else this.perSource.delete(source);
      this.endEpisodes(source);
    });
  }

  /** Stops accepting; the open connections stay until closeConnections. */
  stopAccepting(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  closeConnections(): void {
    for (const c of this.connections) c.close();
  }
}

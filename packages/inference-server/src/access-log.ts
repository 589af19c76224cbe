import { createWriteStream, type WriteStream } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { INFERENCE_PATHS } from '@vigil/shared-types';

/**
 * The access log: one JSON object per line, appended without blocking the event loop. Lines of
 * successful completions have `"msg":"request completed"` (the guardian reads that).
 */
export class AccessLog {
  private readonly stream: WriteStream;
  private closed = false;

  constructor(fd: number) {
    this.stream = createWriteStream('', { fd, flags: 'a', autoClose: true });
    this.stream.on('error', () => {
      // A full disk must not take the server down; the main log has the errors.
    });
  }

  write(record: Record<string, unknown>): void {
    if (this.closed) return;
    this.stream.write(`${JSON.stringify(record)}\n`);
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return new Promise((resolve) => this.stream.end(() => resolve()));
  }
}

/** Writes one request's line: status, duration, listener and peer, and what the route adds. */
export type RequestLog = (
  req: IncomingMessage,
  listener: string,
  startedNs: bigint,
  status: number,
  extra?: Record<string, unknown>,
  msg?: string,
) => void;

/** The request log of `log` (nothing is written without one). */
export function requestLog(log: AccessLog | null): RequestLog {
  return (req, listener, startedNs, status, extra = {}, msg = 'request') => {
    if (!log) return;
    const durationMs = Number(process.hrtime.bigint() - startedNs) / 1e6;
    const path = (req.url ?? '/').split('?')[0];
    log.write({
      ts: Date.now() / 1000,
      level: status >= 500 && path !== INFERENCE_PATHS.health ? 'warn' : 'info',
      msg,
      method: req.method,
      path,
      status,
      duration_ms: Math.round(durationMs * 1000) / 1000,
      listener,
      remote: req.socket.remoteAddress,
      ...extra,
    });
  };
}

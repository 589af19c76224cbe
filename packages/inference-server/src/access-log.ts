import { createWriteStream, type WriteStream } from 'node:fs';

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

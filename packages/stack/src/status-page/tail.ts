/**
 * Reads a growing log incrementally: each `read()` returns the complete lines appended since the
 * last one (a partial last line waits for its end). The position is remembered with the file's
 * identity (device, inode): a file replaced (rotated) or cut short is read again from its start.
 * Never reads more than `maxBytes` per call, so a huge backlog is taken in bounded steps.
 */
import { closeSync, fstatSync, openSync, readSync, statSync } from 'node:fs';

const CHUNK = 1 << 20;

export class LogTail {
  private offset = 0;
  private identity = '';
  private partial: Buffer = Buffer.alloc(0);

  constructor(
    readonly file: string,
    private readonly maxBytes = 64 << 20,
  ) {}

  /** The complete lines appended since the last call; `reset` true when the file was replaced or cut. */
  read(): { lines: string[]; reset: boolean } {
    let fd: number;
    try {
      fd = openSync(this.file, 'r');
    } catch {
      return { lines: [], reset: false };
    }
    try {
      const st = fstatSync(fd);
      const identity = `${st.dev}:${st.ino}`;
      let reset = false;
      if (identity !== this.identity || st.size < this.offset) {
        reset = this.identity !== '';
        this.identity = identity;
        this.offset = 0;
        this.partial = Buffer.alloc(0);
      }
      const end = Math.min(st.size, this.offset + this.maxBytes);
      const parts: Buffer[] = [this.partial];
      while (this.offset < end) {
        const buf = Buffer.allocUnsafe(Math.min(CHUNK, end - this.offset));
        const n = readSync(fd, buf, 0, buf.length, this.offset);
        if (n <= 0) break;
        this.offset += n;
        parts.push(buf.subarray(0, n));
      }
      // Split on bytes, so that a character cut between two reads is decoded whole.
      const bytes = Buffer.concat(parts);
      const nl = bytes.lastIndexOf(0x0a);
      this.partial = Buffer.from(bytes.subarray(nl + 1));
      if (this.partial.length > CHUNK) this.partial = Buffer.alloc(0); // a megabyte without a newline is no log line
      return { lines: nl < 0 ? [] : bytes.toString('utf8', 0, nl).split('\n'), reset };
    } finally {
      closeSync(fd);
    }
  }

  /** Whether the file has bytes not read yet (cheap: one stat). */
  pending(): boolean {
    try {
      const st = statSync(this.file);
      return `${st.dev}:${st.ino}` !== this.identity || st.size !== this.offset;
    } catch {
      return false;
    }
  }
}

/** Each line parsed as a JSON object; lines that are not (a stack trace, a cut line) are skipped. */
export function jsonLines(lines: readonly string[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      const v = JSON.parse(line) as unknown;
      if (v && typeof v === 'object' && !Array.isArray(v)) out.push(v as Record<string, unknown>);
    } catch {
      // skipped
    }
  }
  return out;
}

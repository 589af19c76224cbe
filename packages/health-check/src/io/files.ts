/** Reading logs: the end of a (large) file, as lines. */
import { closeSync, openSync, readSync, statSync } from 'node:fs';

/** The last `maxBytes` of a file as lines (the first, partial one dropped); [] when absent. */
export function tailLines(file: string, maxBytes = 4 * 1024 * 1024): string[] {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return [];
  }
  try {
    const size = statSync(file).size;
    const start = Math.max(0, size - maxBytes);
    const buf = Buffer.alloc(size - start);
    const n = buf.length > 0 ? readFully(fd, buf, start) : 0;
    const lines = buf.subarray(0, n).toString('utf8').split('\n');
    return start > 0 ? lines.slice(1) : lines;
  } finally {
    closeSync(fd);
  }
}

function readFully(fd: number, buf: Buffer, position: number): number {
  let off = 0;
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, position + off);
    if (n === 0) break;
    off += n;
  }
  return off;
}

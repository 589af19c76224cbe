/**
 * Reads what a log file gained since the last read, from a remembered position that survives
 * the guardian's restarts (it lives in the state file): robust to rotation (another inode, or the
 * same inode number given to a new file after the old one was deleted: the new file is read from
 * its start), truncation (a size below the position: from the start), a file that does not exist
 * yet, and a last line still being written (read again next time).
 *
 * A file is known by its device and inode number and by a digest of its first bytes (`head`), as
 * log shippers do: a filesystem hands a freed inode number to the next file it creates, so the
 * number alone would take a log rotated by deletion for the old one and read it from the old offset.
 */
import { createHash } from 'node:crypto';
import { open, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { lineTime } from '@vigil/shared-types';

export interface LogPosition {
  readonly dev: number;
  readonly ino: number;
  readonly offset: number;
  /** The file's first bytes when read (up to HEAD_BYTES): their count and SHA-256 (hex). Absent in
   * positions stored by older versions: then the inode alone identifies the file. */
  readonly head?: { readonly bytes: number; readonly sha256: string };
}

export interface LogLine {
  readonly text: string;
  /** Unix seconds: the line's own timestamp when it has one, else the file's modification time. */
  readonly at: number;
}

export interface LogRead {
  /** Complete lines, then the unfinished last line (if any), which is not consumed. */
  readonly lines: readonly LogLine[];
  /** Where the next read starts; null while the file does not exist. */
  readonly position: LogPosition | null;
  /** No position was remembered: this read looked at the file's tail only. */
  readonly first: boolean;
  readonly rotated: boolean;
  readonly truncated: boolean;
  /** On rotation: the file the old inode now has (`FILE.1`, …) whose rest was read first, or null. */
  readonly rotatedTo?: string | null;
}

export interface ReadOptions {
  /** Bytes read of a file seen for the first time (its tail). */
  readonly tailBytes?: number;
  /** Most bytes read at once; beyond, the oldest are skipped (what is recent is at the end). */
  readonly maxBytes?: number;
}

const DEFAULT_TAIL = 64 * 1024;
const DEFAULT_MAX = 1024 * 1024;
/** How many of a file's first bytes identify it beside its inode (a log's first line and more). */
export const HEAD_BYTES = 256;

type Handle = Awaited<ReturnType<typeof open>>;
type Head = NonNullable<LogPosition['head']>;

async function readAt(fh: Handle, length: number, position: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return buf.subarray(0, got);
}

const digest = (bytes: Buffer): Head => ({
  bytes: bytes.length,
  sha256: createHash('sha256').update(bytes).digest('hex'),
});

/** The head of the open file now: its first bytes, up to HEAD_BYTES. */
async function headOf(fh: Handle, size: number): Promise<Head> {
  return digest(await readAt(fh, Math.min(size, HEAD_BYTES), 0));
}

/** Whether the open file is the one `position` was taken in: same inode, and the same first bytes. */
async function isSameFile(fh: Handle, st: { dev: number; ino: number; size: number }, position: LogPosition) {
  if (position.ino !== st.ino || position.dev !== st.dev) return false;
  const head = position.head;
  if (!head) return true;
  if (st.size < head.bytes) return false;
  return digest(await readAt(fh, head.bytes, 0)).sha256 === head.sha256;
}

/** Reads the new lines of `path` after `position` (null: the file's tail). */
export async function readNewLines(
  path: string,
  position: LogPosition | null,
  options: ReadOptions = {},
): Promise<LogRead> {
  const tailBytes = options.tailBytes ?? DEFAULT_TAIL;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX;
  let fh: Handle;
  try {
    fh = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      // Gone (or not there yet): when it comes back it is a new file, read from its start.
      return { lines: [], position: null, first: position === null, rotated: false, truncated: false };
    }
    throw err;
  }
  try {
    const st = await fh.stat();
    const mtime = st.mtimeMs / 1000;
    const first = position === null;
    const otherInode = !first && (position.ino !== st.ino || position.dev !== st.dev);
    const truncated = !first && !otherInode && st.size < position.offset;
    // The same inode number with other first bytes: a new file that was given a freed number.
    const rotated = otherInode || (!first && !truncated && !(await isSameFile(fh, st, position)));
    let start = first ? Math.max(0, st.size - tailBytes) : rotated || truncated ? 0 : position.offset;
    let skipPartialHead = first && start > 0;
    if (st.size - start > maxBytes) {
      start = st.size - maxBytes;
      skipPartialHead = true;
    }
    let data = await readAt(fh, st.size - start, start);
    let consumedBase = start;
    if (skipPartialHead) {
      // Reading from the middle of the file: the first piece is the end of an older line.
      const nl = data.indexOf(0x0a);
      if (nl < 0) {
        consumedBase = start + data.length;
        data = data.subarray(data.length);
      } else {
        data = data.subarray(nl + 1);
        consumedBase = start + nl + 1;
      }
    }
    const lastNl = data.lastIndexOf(0x0a);
    const complete = lastNl < 0 ? '' : data.subarray(0, lastNl).toString('utf8');
    const partial = data.subarray(lastNl + 1).toString('utf8');
    const texts = complete === '' && lastNl < 0 ? [] : complete.split('\n');
    if (partial.trim() !== '') texts.push(partial);
    const lines = texts
      .map((t) => t.replace(/\r$/, ''))
      .filter((t) => t.trim() !== '')
      .map((text) => ({ text, at: lineTime(text) ?? mtime }));
    // Rotated: what was written to the old file after the last read comes first.
    const before = otherInode ? await restOfRotated(path, position, maxBytes) : null;
    return {
      lines: before ? [...before.lines, ...lines] : lines,
      rotatedTo: before?.path ?? null,
      position: {
        dev: st.dev,
        ino: st.ino,
        offset: consumedBase + lastNl + 1,
        // The same file's full head does not change: it is not read again.
        head:
          !first && !rotated && !truncated && position.head?.bytes === HEAD_BYTES
            ? position.head
            : await headOf(fh, st.size),
      },
      first,
      rotated,
      truncated,
    };
  } finally {
    await fh.close();
  }
}

/**
 * The lines of the rotated file (the remembered inode, renamed beside `path`: `FILE.1`,
 * `FILE-20250101`, …) after `position`, its last line included (nothing writes there any more).
 * Null when no such file is found (deleted, compressed).
 */
async function restOfRotated(
  path: string,
  position: LogPosition,
  maxBytes: number,
): Promise<{ path: string; lines: LogLine[] } | null> {
  const dir = dirname(path);
  const base = basename(path);
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n !== base && n.startsWith(base));
  } catch {
    return null;
  }
  // The likeliest names first.
  names.sort((a, b) => (a === `${base}.1` ? -1 : b === `${base}.1` ? 1 : a.localeCompare(b)));
  for (const name of names) {
    const file = join(dir, name);
    let fh: Handle;
    try {
      fh = await open(file, 'r');
    } catch {
      continue;
    }
    try {
      const st = await fh.stat();
      if (!(await isSameFile(fh, st, position))) continue;
      const start = Math.max(position.offset, st.size - maxBytes);
      if (st.size <= start) return { path: file, lines: [] };
      let text = (await readAt(fh, st.size - start, start)).toString('utf8');
      // Started in the middle of a line (more than maxBytes were written): drop its end.
      if (start > position.offset) text = text.slice(text.indexOf('\n') + 1);
      const mtime = st.mtimeMs / 1000;
      const lines = text
        .split('\n')
        .map((t) => t.replace(/\r$/, ''))
        .filter((t) => t.trim() !== '')
        .map((t) => ({ text: t, at: lineTime(t) ?? mtime }));
      return { path: file, lines };
    } finally {
      await fh.close();
    }
  }
  return null;
}

/** The position at the current end of `path` (null when it does not exist). */
export async function endPosition(path: string): Promise<LogPosition | null> {
  let fh: Handle;
  try {
    fh = await open(path, 'r');
  } catch {
    return null;
  }
  try {
    const st = await fh.stat();
    return { dev: st.dev, ino: st.ino, offset: st.size, head: await headOf(fh, st.size) };
  } finally {
    await fh.close();
  }
}

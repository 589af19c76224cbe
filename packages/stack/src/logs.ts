/**
 * `vigil logs SERVICE [-n N] [-f]`: a service's log under the home (`logs/NAME.log`; the health
 * check's is `state/health.log`), whole or its last N lines, then, with -f, what is appended to
 * it until Ctrl-C (a log truncated or replaced is followed from its start).
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { sleep } from '@vigil/shared-types/light';
import { UsageError } from './errors.js';
import type { HomePaths } from './paths.js';
import { SERVICE_NAMES } from './service-names.js';

/** Names `vigil logs` knows: the services, the health check and the access logs. */
export const LOG_NAMES = [
  ...SERVICE_NAMES,
  'health-check',
  'inference-server-access',
  'inference-fallback-access',
] as const;

/** The file of a log name; UsageError for an unknown one. */
export function logFileOf(paths: HomePaths, name: string): string {
  if (!(LOG_NAMES as readonly string[]).includes(name)) {
    throw new UsageError(`unknown service "${name}" (known: ${LOG_NAMES.join(', ')})`);
  }
  if (name === 'health-check') return paths.healthLog;
  return paths.log(name);
}

function readRange(fd: number, from: number, to: number): Buffer {
  const buf = Buffer.alloc(to - from);
  let off = 0;
  while (off < buf.length) {
    const n = readSync(fd, buf, off, buf.length - off, from + off);
    if (n <= 0) break;
    off += n;
  }
  return buf.subarray(0, off);
}

/**
 * The last `n` lines of a file (all of it when n is undefined) and its size when read; null when
 * it does not exist. Reads from the end, so a long log costs what is printed.
 */
export function readTail(file: string, n?: number): { text: string; size: number } | null {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const size = statSync(file).size;
    if (n === undefined) return { text: readRange(fd, 0, size).toString('utf8'), size };
    if (n <= 0) return { text: '', size };
    // Back from the end, a chunk at a time, until n line ends (the last one's aside) are seen.
    let start = size;
    let chunks: Buffer[] = [];
    let newlines = 0;
    const endsWithNewline = size > 0 && readRange(fd, size - 1, size)[0] === 0x0a;
    const wanted = n + (endsWithNewline ? 1 : 0);
    while (start > 0 && newlines < wanted) {
      const from = Math.max(0, start - 64 * 1024);
      const chunk = readRange(fd, from, start);
      chunks = [chunk, ...chunks];
      for (const b of chunk) if (b === 0x0a) newlines += 1;
      start = from;
    }
    const all = Buffer.concat(chunks).toString('utf8');
    const lines = all.split('\n');
    const keep = lines.slice(-wanted);
    return { text: keep.join('\n'), size };
  } finally {
    closeSync(fd);
  }
}

/** The last `n` non-empty lines of a file ([] when it does not exist). */
export function lastLines(file: string, n: number): string[] {
  const tail = readTail(file, n + 1);
  return tail
    ? tail.text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .slice(-n)
    : [];
}

export interface LogsOptions {
  readonly lines?: number;
  readonly follow?: boolean;
  /** Where the text goes (stdout). */
  readonly write?: (text: string) => void;
  /** Follow until this resolves (default: until the process is ended). */
  readonly until?: Promise<void>;
  readonly pollMs?: number;
}

/** Prints a log; with `follow`, keeps printing what is appended. False when the log does not exist yet (and not following). */
export async function printLog(file: string, options: LogsOptions = {}): Promise<boolean> {
  const write = options.write ?? ((t: string) => void process.stdout.write(t));
  const tail = readTail(file, options.lines);
  if (tail) write(tail.text);
  if (!options.follow) return tail !== null;
  let done = false;
  void options.until?.then(() => {
    done = true;
  });
  let pos = tail?.size ?? 0;
  let ino = tail ? statSync(file).ino : -1;
  while (!done) {
    await sleep(options.pollMs ?? 250);
    let st: { size: number; ino: number };
    try {
      st = statSync(file);
    } catch {
      continue; // not there (yet, or while being replaced)
    }
    if (st.ino !== ino || st.size < pos) {
      ino = st.ino;
      pos = 0;
    }
    if (st.size > pos) {
      const fd = openSync(file, 'r');
      try {
        write(readRange(fd, pos, st.size).toString('utf8'));
      } finally {
        closeSync(fd);
      }
      pos = st.size;
    }
  }
  return true;
}

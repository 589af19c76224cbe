/**
 * Newline-delimited framing, shared by the daemon's TCP transport, the relay's method filter and
 * the health check. Bytes arrive in chunks split anywhere (also inside a multi-byte UTF-8
 * character: framing works on bytes and a CR or LF byte never occurs inside one). A line ends as
 * Java's `BufferedReader.readLine` ends it (signal-cli reads its TCP lines so): at `\n`, at `\r`,
 * or at `\r\n`, which is one line end, also when the `\r` ends one chunk and the `\n` starts
 * the next. A line is reported as soon as its end is seen (a lone `\r` is not held back waiting
 * for a possible `\n`). A line longer than the limit is reported once, as soon as it is over, and
 * its bytes are dropped up to the next line end, so the buffer never holds more than the limit.
 *
 * `frameChunk` is a pure function of its arguments (no I/O, no globals). For speed the state is
 * threaded linearly: pass the state it returns to the next call and never reuse an older one.
 */

const LF = 0x0a;
const CR = 0x0d;

/** The default maximum line length: 1 MiB of content, terminator not counted. */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;

export interface FramerOptions {
  /** Longest line content accepted, in bytes, excluding the `\n`, `\r` or `\r\n` terminator. */
  readonly maxLineBytes: number;
}

export interface FramerState {
  /** Bytes of the current, still incomplete line (only the first `pendingBytes` are used). */
  readonly pending: Uint8Array;
  readonly pendingBytes: number;
  /** The current line went over the limit: drop bytes up to the next line end. */
  readonly discarding: boolean;
  /** The previous chunk ended in `\r`: a `\n` at the start of the next one belongs to that line end. */
  readonly skipLf?: boolean;
}

/** How a line ended: `\n`, `\r\n`, or a lone `\r` (also a `\r` whose `\n` came in the next chunk). */
export type LineEnd = 'lf' | 'crlf' | 'cr';

export type Frame =
  /** A complete line, without its terminator. `crlf` tells whether it ended in `\r\n`. */
  | { readonly kind: 'line'; readonly bytes: Uint8Array; readonly crlf: boolean; readonly end: LineEnd }
  /** A line longer than `maxLineBytes`; reported once per line, its bytes dropped. */
  | { readonly kind: 'oversize'; readonly limit: number };

export interface FrameResult {
  readonly state: FramerState;
  readonly frames: Frame[];
}

const EMPTY = new Uint8Array(0);

export function initialFramerState(): FramerState {
  return { pending: EMPTY, pendingBytes: 0, discarding: false, skipLf: false };
}

/** Appends `part` to the pending bytes, growing the buffer by doubling (at most to `cap`). */
function append(pending: Uint8Array, used: number, part: Uint8Array, cap: number): Uint8Array {
  const need = used + part.length;
  let buf = pending;
  if (need > buf.length) {
    let size = Math.max(64, buf.length * 2);
    while (size < need) size *= 2;
    buf = new Uint8Array(Math.min(Math.max(size, need), Math.max(cap, need)));
    buf.set(pending.subarray(0, used));
  }
  buf.set(part, used);
  return buf;
}

/** Frames one chunk. */
export function frameChunk(state: FramerState, chunk: Uint8Array, options: FramerOptions): FrameResult {
  const max = options.maxLineBytes;
  const frames: Frame[] = [];
  let { pending, pendingBytes, discarding } = state;
  let skipLf = state.skipLf === true;
  let start = 0;
  if (skipLf && chunk.length > 0) {
    if (chunk[0] === LF) start = 1;
    skipLf = false;
  }
  // The next LF and CR at or after `start`, each searched for again only once passed: linear.
  let lf = chunk.indexOf(LF, start);
  let cr = chunk.indexOf(CR, start);
  for (;;) {
    if (lf >= 0 && lf < start) lf = chunk.indexOf(LF, start);
    if (cr >= 0 && cr < start) cr = chunk.indexOf(CR, start);
    const at = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
    if (at < 0) {
      const rest = chunk.subarray(start);
      if (!discarding && rest.length > 0) {
        // The pending bytes never exceed max, so the buffer is bounded whatever the sender does.
        if (pendingBytes + rest.length > max) {
          frames.push({ kind: 'oversize', limit: max });
          discarding = true;
          pendingBytes = 0;
        } else {
          pending = append(pending, pendingBytes, rest, max);
          pendingBytes += rest.length;
        }
      }
      break;
    }
    let end: LineEnd = 'lf';
    let next = at + 1;
    if (at === cr) {
      end = 'cr';
      if (next < chunk.length) {
        if (chunk[next] === LF) {
          end = 'crlf';
          next += 1;
        }
      } else {
        skipLf = true;
      }
    }
    if (discarding) {
      discarding = false;
    } else {
      const part = chunk.subarray(start, at);
      if (pendingBytes === 0) {
        // zero-copy: a view of the caller's chunk
        frames.push(part.length > max ? { kind: 'oversize', limit: max } : line(part, end));
      } else if (pendingBytes + part.length > max) {
        frames.push({ kind: 'oversize', limit: max });
      } else {
        pending = append(pending, pendingBytes, part, max);
        frames.push(line(pending.slice(0, pendingBytes + part.length), end));
      }
    }
    pendingBytes = 0;
    start = next;
  }
  // Release a large buffer once it is no longer needed, so an idle connection holds little.
  if (pendingBytes === 0 && pending.length > 4096) pending = EMPTY;
  return { state: { pending, pendingBytes, discarding, skipLf }, frames };
}

function line(bytes: Uint8Array, end: LineEnd): Frame {
  return { kind: 'line', bytes, crlf: end === 'crlf', end };
}

/**
 * At the end of the input: the bytes after the last line end, if any, as a final line (a peer
 * that half-closes after a request without a trailing newline still gets it handled; its `end`
 * says `lf`, though none came).
 */
export function endFrames(state: FramerState): Frame[] {
  if (state.discarding || state.pendingBytes === 0) return [];
  return [{ kind: 'line', bytes: state.pending.slice(0, state.pendingBytes), crlf: false, end: 'lf' }];
}

/** A stateful convenience around `frameChunk` for one stream. */
export class LineFramer {
  private state = initialFramerState();
  constructor(readonly options: FramerOptions = { maxLineBytes: DEFAULT_MAX_LINE_BYTES }) {}

  push(chunk: Uint8Array): Frame[] {
    // The common case, one whole line ending in LF at a line boundary, without the general loop.
    const last = chunk.length - 1;
    if (
      last >= 0 &&
      last <= this.options.maxLineBytes &&
      chunk[last] === LF &&
      this.idle &&
      chunk.indexOf(LF) === last &&
      chunk.indexOf(CR) < 0
    ) {
      return [line(chunk.subarray(0, last), 'lf')];
    }
    const { state, frames } = frameChunk(this.state, chunk, this.options);
    this.state = state;
    return frames;
  }

  end(): Frame[] {
    const frames = endFrames(this.state);
    this.state = initialFramerState();
    return frames;
  }

  /** Bytes held for the current incomplete line. */
  get bufferedBytes(): number {
    return this.state.pendingBytes;
  }

  /** At a line boundary: nothing held, not inside an oversize line, no `\n` of a `\r\n` still due. */
  get idle(): boolean {
    return this.state.pendingBytes === 0 && !this.state.discarding && this.state.skipLf !== true;
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Decodes a line as UTF-8; null when the bytes are not valid UTF-8. */
export function decodeLine(bytes: Uint8Array): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/** One JSON value as one line (JSON.stringify escapes every newline inside strings). */
export function encodeLine(value: unknown): string {
  return `${JSON.stringify(value)}\n`;
}

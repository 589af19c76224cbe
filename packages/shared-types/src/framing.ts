/**
 * Newline-delimited framing, shared by the daemon's TCP transport, the relay's method filter and
 * the health check. Bytes arrive in chunks split anywhere (also inside a multi-byte UTF-8
 * character: framing works on bytes and a newline byte never occurs inside one); lines end in
 * `\n` or `\r\n`; a line longer than the limit is reported once, as soon as it is over, and its
 * bytes are dropped up to the next newline, so the buffer never holds more than the limit.
 *
 * `frameChunk` is a pure function of its arguments (no I/O, no globals). For speed the state is
 * threaded linearly: pass the state it returns to the next call and never reuse an older one.
 */

const LF = 0x0a;
const CR = 0x0d;

/** The default maximum line length: 1 MiB of content, terminator not counted. */
export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;

export interface FramerOptions {
  /** Longest line content accepted, in bytes, excluding the `\n` or `\r\n` terminator. */
  readonly maxLineBytes: number;
}

export interface FramerState {
  /** Bytes of the current, still incomplete line (only the first `pendingBytes` are used). */
  readonly pending: Uint8Array;
  readonly pendingBytes: number;
  /** The current line went over the limit: drop bytes up to the next newline. */
  readonly discarding: boolean;
}

export type Frame =
  /** A complete line, without its terminator. `crlf` tells whether it ended in `\r\n`. */
  | { readonly kind: 'line'; readonly bytes: Uint8Array; readonly crlf: boolean }
  /** A line longer than `maxLineBytes`; reported once per line, its bytes dropped. */
  | { readonly kind: 'oversize'; readonly limit: number };

export interface FrameResult {
  readonly state: FramerState;
  readonly frames: Frame[];
}

const EMPTY = new Uint8Array(0);

export function initialFramerState(): FramerState {
  return { pending: EMPTY, pendingBytes: 0, discarding: false };
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

/** Content length of pending bytes: a trailing CR may still be the start of `\r\n`. */
function pendingContent(buf: Uint8Array, used: number): number {
  return used > 0 && buf[used - 1] === CR ? used - 1 : used;
}

/** Frames one chunk. */
export function frameChunk(state: FramerState, chunk: Uint8Array, options: FramerOptions): FrameResult {
  const max = options.maxLineBytes;
  const frames: Frame[] = [];
  let { pending, pendingBytes, discarding } = state;
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(LF, start);
    if (nl < 0) {
      const rest = chunk.subarray(start);
      if (!discarding && rest.length > 0) {
        // The pending bytes never exceed max + 1 (content plus a possible CR), so the buffer
        // is bounded whatever the sender does.
        if (pendingBytes + rest.length > max + 1) {
          frames.push({ kind: 'oversize', limit: max });
          discarding = true;
          pendingBytes = 0;
        } else {
          pending = append(pending, pendingBytes, rest, max + 1);
          pendingBytes += rest.length;
          if (pendingContent(pending, pendingBytes) > max) {
            frames.push({ kind: 'oversize', limit: max });
            discarding = true;
            pendingBytes = 0;
          }
        }
      }
      break;
    }
    if (discarding) {
      discarding = false;
    } else {
      const part = chunk.subarray(start, nl);
      let bytes: Uint8Array;
      if (pendingBytes === 0) {
        bytes = part; // zero-copy: a view of the caller's chunk
      } else if (pendingBytes + part.length > max + 1) {
        bytes = EMPTY;
        frames.push({ kind: 'oversize', limit: max });
        pendingBytes = 0;
        start = nl + 1;
        continue;
      } else {
        pending = append(pending, pendingBytes, part, max + 1);
        bytes = pending.slice(0, pendingBytes + part.length);
      }
      const crlf = bytes.length > 0 && bytes[bytes.length - 1] === CR;
      if (crlf) bytes = bytes.subarray(0, bytes.length - 1);
      frames.push(bytes.length > max ? { kind: 'oversize', limit: max } : { kind: 'line', bytes, crlf });
    }
    pendingBytes = 0;
    start = nl + 1;
  }
  // Release a large buffer once it is no longer needed, so an idle connection holds little.
  if (pendingBytes === 0 && pending.length > 4096) pending = EMPTY;
  return { state: { pending, pendingBytes, discarding }, frames };
}

/**
 * At the end of the input: the bytes after the last newline, if any, as a final line (a peer
 * that half-closes after a request without a trailing newline still gets it handled).
 */
export function endFrames(state: FramerState): Frame[] {
  if (state.discarding || state.pendingBytes === 0) return [];
  return [{ kind: 'line', bytes: state.pending.slice(0, state.pendingBytes), crlf: false }];
}

/** A stateful convenience around `frameChunk` for one stream. */
export class LineFramer {
  private state = initialFramerState();
  constructor(readonly options: FramerOptions = { maxLineBytes: DEFAULT_MAX_LINE_BYTES }) {}

  push(chunk: Uint8Array): Frame[] {
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

  /** At a line boundary: nothing held, not inside an oversize line. */
  get idle(): boolean {
    return this.state.pendingBytes === 0 && !this.state.discarding;
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

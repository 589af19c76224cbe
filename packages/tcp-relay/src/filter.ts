import { isUtf8 } from 'node:buffer';
import {
  classifyMessage,
  decodeLine,
  failure,
  type JsonRpcFailure,
  RELAY_REFUSED_METHODS,
  RpcErrorCode,
  rpcError,
} from '@vigil/shared-types';

/** The error code of a refused method: "method not found", as far as the guest can tell. */
export const REFUSED_CODE = RpcErrorCode.METHOD_NOT_FOUND;

export type Verdict =
  | { readonly forward: true }
  /** Not forwarded: `reply` (if any) goes back to the guest; `refused` names the methods refused. */
  | {
      readonly forward: false;
      readonly reply: JsonRpcFailure | JsonRpcFailure[] | undefined;
      readonly refused: string[];
    };

const FORWARD: Verdict = { forward: true };
/** `\u`: the only JSON escape that can write a letter, and so a method name, in other bytes. */
const ESCAPE_U = Buffer.from('\\u');
const LF = 0x0a;
const CR = 0x0d;

/**
 * One chunk read at a line boundary, as the filter sees it: in order, runs of complete lines that
 * go on as they are, and the lines that must be judged (those with a `\u` escape), then the
 * incomplete line after the last newline. Joined again, the parts and `rest` are the chunk.
 */
export interface ChunkScan {
  readonly parts: readonly (
    | { readonly kind: 'clean'; readonly bytes: Buffer }
    /** `line` without its newline; `newline` is `\n` or `\r\n` as it came. */
    | { readonly kind: 'judge'; readonly line: Buffer; readonly newline: Buffer }
  )[];
  readonly rest: Buffer;
}

/**
 * Decides, line by line, what the relay lets a guest call. Method names are letters, and of JSON's
 * escapes only `\u` writes a letter (`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t` do not): so
 * without `\u` in the line, a refused method (or a `method` key) can only be written as its
 * literal bytes, and a line that contains none of the refused names in quotes is forwarded
 * without being parsed. Any other line is parsed and judged as JSON (`"start\u004cink"` is no
 * way around it).
 */
export class MethodFilter {
  /**
   * The refused names as they appear in JSON text (`"startLink"`, UTF-8), as one regular
   * expression over the latin1 reading of the bytes: one character per byte, so it matches
   * exactly where a byte search for any of them would, in one pass instead of one per name.
   */
  private readonly needles: RegExp | null;
  readonly refused: ReadonlySet<string>;

  constructor(methods: readonly string[] = RELAY_REFUSED_METHODS) {
    this.refused = new Set(methods);
    const latin1 = methods.map((m) => Buffer.from(JSON.stringify(m)).toString('latin1'));
    this.needles =
      latin1.length === 0 ? null : new RegExp(latin1.map((n) => n.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')).join('|'));
  }

  /**
   * True when `bytes` holds none of the refused names in quotes. A line that lies inside such
   * bytes holds none either, so the relay searches each chunk it reads once instead of each line.
   */
  noRefusedName(bytes: Buffer): boolean {
    return this.needles === null || !this.needles.test(bytes.toString('latin1'));
  }

  /**
   * Splits a chunk that starts at a line boundary (see ChunkScan) without looking at each line:
   * when the chunk holds no refused name, only the lines with a `\u` escape can hide one, so only
   * those are cut out to be judged. Null when a refused name appears: then every
   * line is judged. The caller keeps every line of the chunk within its size limit.
   */
  scanChunk(chunk: Buffer): ChunkScan | null {
    if (!this.noRefusedName(chunk)) return null;
    const last = chunk.lastIndexOf(LF);
    if (last < 0) return { parts: [], rest: chunk };
    const parts: ChunkScan['parts'][number][] = [];
    let start = 0;
    for (;;) {
      const b = chunk.indexOf(ESCAPE_U, start);
      if (b < 0 || b > last) break;
      const lineStart = b === 0 ? 0 : chunk.lastIndexOf(LF, b) + 1;
      const lf = chunk.indexOf(LF, b);
      const end = lf > lineStart && chunk[lf - 1] === CR ? lf - 1 : lf;
      if (lineStart > start) parts.push({ kind: 'clean', bytes: chunk.subarray(start, lineStart) });
      parts.push({ kind: 'judge', line: chunk.subarray(lineStart, end), newline: chunk.subarray(end, lf + 1) });
      start = lf + 1;
    }
    if (last + 1 > start) parts.push({ kind: 'clean', bytes: chunk.subarray(start, last + 1) });
    return { parts, rest: chunk.subarray(last + 1) };
  }

  /**
   * `namesAbsent`: the line is known to hold no refused name in quotes (see noRefusedName). A lone
   * `\r` inside ends a line for the target (as Java's readLine, and so signal-cli and the daemon,
   * read lines): each of the lines it separates is judged, and the whole is refused if one is.
   */
  judge(line: Uint8Array, namesAbsent = false): Verdict {
    const bytes = Buffer.isBuffer(line) ? line : Buffer.from(line.buffer, line.byteOffset, line.byteLength);
    if (bytes.indexOf(ESCAPE_U) < 0 && (namesAbsent || this.noRefusedName(bytes))) return FORWARD;
    const cr = bytes.indexOf(CR);
    if (cr >= 0) {
      const first = this.judgeOne(bytes.subarray(0, cr));
      const rest = this.judge(bytes.subarray(cr + 1 < bytes.length && bytes[cr + 1] === LF ? cr + 2 : cr + 1));
      if (first.forward && rest.forward) return FORWARD;
      const replies = [first, rest].flatMap((v) => (v.forward || v.reply === undefined ? [] : [v.reply].flat()));
      const refused = [first, rest].flatMap((v) => (v.forward ? [] : v.refused));
      return {
        forward: false,
        reply: replies.length === 0 ? undefined : replies.length === 1 ? replies[0] : replies,
        refused,
      };
    }
    return this.judgeOne(bytes);
  }

  private judgeOne(bytes: Buffer): Verdict {
    if (bytes.indexOf(ESCAPE_U) < 0 && this.noRefusedName(bytes)) return FORWARD;
    // The daemon answers invalid UTF-8 itself (checked first: a failed decode throws, which is slow).
    if (!isUtf8(bytes)) return FORWARD;
    const text = decodeLine(bytes);
    if (text === null) return FORWARD;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return FORWARD; // and invalid JSON
    }
    const message = classifyMessage(value);
    const items = message.kind === 'batch' ? message.items : message.kind === 'single' ? [message.item] : [];
    const refused = items.flatMap((i) => (i.kind !== 'invalid' && this.refused.has(i.method) ? [i.method] : []));
    if (refused.length === 0) return FORWARD;
    const answer = (i: (typeof items)[number]): JsonRpcFailure | undefined => {
      if (i.kind === 'notification') return undefined;
      if (i.kind === 'invalid') return failure(i.id, i.error);
      return this.refused.has(i.method)
        ? failure(i.id, rpcError(REFUSED_CODE, `Method ${i.method} is not available through the relay`))
        : failure(
            i.id,
            rpcError(
              RpcErrorCode.INVALID_REQUEST,
              `Batch refused by the relay: it contains ${[...new Set(refused)].join(', ')}`,
            ),
          );
    };
    if (message.kind === 'single') return { forward: false, reply: answer(message.item), refused };
    const replies = items.map(answer).filter((r): r is JsonRpcFailure => r !== undefined);
    return { forward: false, reply: replies.length > 0 ? replies : undefined, refused };
  }
}

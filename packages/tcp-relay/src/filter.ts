import { isUtf8 } from 'node:buffer';
import {
  classifyMessage,
  decodeLine,
  FILE_PARAM_STEMS,
  failure,
  filePathParams,
  type JsonRpcFailure,
  RELAY_REFUSED_METHODS,
  RpcErrorCode,
  rpcError,
} from '@vigil/shared-types';

/** The error code of a refused method: "method not found", as far as the guest can tell. */
export const REFUSED_CODE = RpcErrorCode.METHOD_NOT_FOUND;
/**
 * The error code of a request refused for a file path: "invalid params", as signal-cli and the
 * daemon answer a parameter they will not take (the request is fine; one value is not), and what
 * the daemon itself answers for an attachment it refuses to read.
 */
export const FILE_PATH_CODE = RpcErrorCode.INVALID_PARAMS;

export type Verdict =
  | { readonly forward: true }
  /**
   * Not forwarded: `reply` (if any) goes back to the guest; `refused` names the methods refused,
   * `paths` the parameters refused for naming a file on the host, `unreadable` a line refused
   * because it could not be read as JSON.
   */
  | {
      readonly forward: false;
      readonly reply: JsonRpcFailure | JsonRpcFailure[] | undefined;
      readonly refused: string[];
      readonly paths: string[];
      readonly unreadable: boolean;
    };

/** What the filter refuses besides its methods. */
export interface FilterOptions {
  /** Refuse requests whose params name a file on the host rather than a `data:` URI (default true). */
  readonly refuseFilePaths?: boolean;
}

const FORWARD: Verdict = { forward: true };
/** A line that could hold a refused name but cannot be read as JSON: the parse error the daemon would give. */
const UNREADABLE: Verdict = {
  forward: false,
  reply: failure(null, rpcError(RpcErrorCode.PARSE_ERROR, 'Parse error: the relay cannot read this request as JSON')),
  refused: [],
  paths: [],
  unreadable: true,
};
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
 * Decides, line by line, what the relay lets a guest send: no refused method, and (by default) no
 * parameter that names a file on the host (see FILE_PARAMS). Method and parameter names are
 * letters, `-` and `_`, and of JSON's escapes only `\u` writes one of those (`\"`, `\\`, `\/`,
 * `\b`, `\f`, `\n`, `\r`, `\t` do not): so without `\u` in the line, a refused method or a file
 * parameter can only be written as its literal bytes, and a line that contains none of them after
 * a quote is forwarded without being parsed. Any other line is parsed and judged as JSON
 * (`"start\u004cink"`, `"\u0061ttachments"` and `"\/etc\/passwd"` are no way around it); one that
 * cannot be parsed is refused, so that a more lenient parser behind the relay cannot read it
 * otherwise.
 */
export class MethodFilter {
  /**
   * The refused names as they begin in JSON text (`"startLink"`, `"attachment`, UTF-8), as one
   * regular expression over the latin1 reading of the bytes: one character per byte, so it
   * matches exactly where a byte search for any of them would, in one pass instead of one per name.
   */
  private readonly needles: RegExp | null;
  readonly refused: ReadonlySet<string>;
  readonly refuseFilePaths: boolean;

  constructor(methods: readonly string[] = RELAY_REFUSED_METHODS, options: FilterOptions = {}) {
    this.refused = new Set(methods);
    this.refuseFilePaths = options.refuseFilePaths ?? true;
    const names = methods.map((m) => JSON.stringify(m));
    // A file parameter's key: its opening quote and name (the plural begins the same way).
    if (this.refuseFilePaths) names.push(...FILE_PARAM_STEMS.map((k) => `"${k}`));
    const latin1 = [...new Set(names)].map((n) => Buffer.from(n).toString('latin1'));
    this.needles =
      latin1.length === 0 ? null : new RegExp(latin1.map((n) => n.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&')).join('|'));
  }

  /**
   * True when `bytes` holds none of the refused names (see needles). A line that lies inside such
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
   * `namesAbsent`: the line is known to hold no refused name (see noRefusedName). A lone `\r`
   * inside ends a line for the target (as Java's readLine, and so signal-cli and the daemon, read
   * lines): each of the lines it separates is judged on its own, with the full judgement (methods,
   * file paths, unreadable), and the whole is refused if one is. The relay itself hands this one
   * line at a time (its framer ends lines at `\r`); the split is for any other caller.
   */
  judge(line: Uint8Array, namesAbsent = false): Verdict {
    const bytes = Buffer.isBuffer(line) ? line : Buffer.from(line.buffer, line.byteOffset, line.byteLength);
    if (bytes.indexOf(ESCAPE_U) < 0 && (namesAbsent || this.noRefusedName(bytes))) return FORWARD;
    if (bytes.indexOf(CR) < 0) return this.judgeOne(bytes);
    // Iteratively, not by recursion: a line may hold any number of CRs.
    const refusals: Extract<Verdict, { forward: false }>[] = [];
    let start = 0;
    while (start <= bytes.length) {
      const cr = bytes.indexOf(CR, start);
      const end = cr < 0 ? bytes.length : cr;
      const verdict = this.judgeOne(bytes.subarray(start, end));
      if (!verdict.forward) refusals.push(verdict);
      if (cr < 0) break;
      start = cr + 1 < bytes.length && bytes[cr + 1] === LF ? cr + 2 : cr + 1;
    }
    if (refusals.length === 0) return FORWARD;
    if (refusals.length === 1) return refusals[0]!;
    const replies = refusals.flatMap((v) => (v.reply === undefined ? [] : [v.reply].flat()));
    return {
      forward: false,
      reply: replies.length === 0 ? undefined : replies.length === 1 ? replies[0] : replies,
      refused: refusals.flatMap((v) => v.refused),
      paths: [...new Set(refusals.flatMap((v) => v.paths))],
      unreadable: refusals.some((v) => v.unreadable),
    };
  }

  /** One line (no `\r` inside) judged as JSON. */
  private judgeOne(bytes: Buffer): Verdict {
    if (bytes.indexOf(ESCAPE_U) < 0 && this.noRefusedName(bytes)) return FORWARD;
    // A line that could hold a refused name is refused unless it reads as JSON (see the class
    // comment): a more lenient parser behind the relay must not read it otherwise. Invalid UTF-8
    // is checked first: a failed decode throws, which is slow.
    const text = isUtf8(bytes) ? decodeLine(bytes) : null;
    let value: unknown;
    try {
      if (text === null) throw new Error('not UTF-8');
      value = JSON.parse(text);
    } catch {
      return UNREADABLE;
    }
    const message = classifyMessage(value);
    if (message.kind === 'error') return FORWARD; // an empty batch: the daemon answers it
    const items = message.kind === 'batch' ? message.items : [message.item];
    const elements: unknown[] = Array.isArray(value) ? value : [value];
    const methodOf = (i: (typeof items)[number]) =>
      i.kind !== 'invalid' && this.refused.has(i.method) ? i.method : null;
    const pathsOf = items.map((_, n) => (this.refuseFilePaths ? filePathParams(elements[n]) : []));
    const refused = items.flatMap((i) => methodOf(i) ?? []);
    const paths = [...new Set(pathsOf.flat())];
    if (refused.length === 0 && paths.length === 0) return FORWARD;
    const why = [...new Set(refused), ...(paths.length > 0 ? [`a file path in ${paths.join(', ')}`] : [])].join(', ');
    const answer = (i: (typeof items)[number], n: number): JsonRpcFailure | undefined => {
      if (i.kind === 'notification') return undefined;
      if (i.kind === 'invalid') return failure(i.id, i.error);
      const method = methodOf(i);
      if (method !== null)
        return failure(i.id, rpcError(REFUSED_CODE, `Method ${method} is not available through the relay`));
      const own = pathsOf[n]!;
      if (own.length > 0) return failure(i.id, rpcError(FILE_PATH_CODE, filePathMessage(own)));
      return failure(i.id, rpcError(RpcErrorCode.INVALID_REQUEST, `Batch refused by the relay: it contains ${why}`));
    };
    const replies = items.map(answer);
    const reply = message.kind === 'single' ? replies[0] : replies.filter((r): r is JsonRpcFailure => r !== undefined);
    return {
      forward: false,
      reply: Array.isArray(reply) && reply.length === 0 ? undefined : reply,
      refused,
      paths,
      unreadable: false,
    };
  }
}

/** The message of a request refused for its file parameters. */
export function filePathMessage(params: readonly string[]): string {
  return `${params.join(', ')}: file paths are not accepted through the relay; send the file as a data: URI`;
}

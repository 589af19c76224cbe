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
const BACKSLASH = 0x5c;

/**
 * Decides, line by line, what the relay lets a guest call. Without a backslash in the line, a
 * method name can only appear as its literal quoted bytes, so a line that contains none of the
 * refused names is forwarded without being parsed; any other line is parsed and judged as JSON
 * (escapes such as `"start\u004cink"` are no way around it).
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

  /** `namesAbsent`: the line is known to hold no refused name in quotes (see noRefusedName). */
  judge(line: Uint8Array, namesAbsent = false): Verdict {
    const bytes = Buffer.isBuffer(line) ? line : Buffer.from(line.buffer, line.byteOffset, line.byteLength);
    if (bytes.indexOf(BACKSLASH) < 0 && (namesAbsent || this.noRefusedName(bytes))) return FORWARD;
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

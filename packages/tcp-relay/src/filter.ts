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
  private readonly needles: Buffer[];
  readonly refused: ReadonlySet<string>;

  constructor(methods: readonly string[] = RELAY_REFUSED_METHODS) {
    this.refused = new Set(methods);
    this.needles = methods.map((m) => Buffer.from(JSON.stringify(m)));
  }

  judge(line: Uint8Array): Verdict {
    const bytes = Buffer.isBuffer(line) ? line : Buffer.from(line.buffer, line.byteOffset, line.byteLength);
    if (bytes.indexOf(BACKSLASH) < 0 && !this.needles.some((n) => bytes.indexOf(n) >= 0)) return FORWARD;
    const text = decodeLine(bytes);
    if (text === null) return FORWARD; // the daemon answers invalid UTF-8 itself
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

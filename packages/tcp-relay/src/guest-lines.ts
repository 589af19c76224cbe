import { type Frame, LineFramer } from '@vigil/shared-types';
import type { MethodFilter, Verdict } from './filter.js';

const LF = Buffer.from('\n');
const CRLF = Buffer.from('\r\n');
const CR = Buffer.from('\r');

/** A line the filter did not let through. */
export type Refusal = Extract<Verdict, { forward: false }>;

/**
 * The guest's side of a filtered connection, without the sockets: it takes the bytes as they are
 * read, in chunks split anywhere, and gives back what goes on to the target, in order and in byte
 * ranges of what was read where it can. A refused line is handed to `onRefused` (the relay answers
 * it); a line over `maxLineBytes` to `onOversize`; neither goes on.
 */
export class GuestLines {
  private readonly framer: LineFramer;
  /**
   * The previous read ended in a `\r` that ended a line: whether that line went on (true) or was
   * refused (false). A `\n` that starts the next read completes its `\r\n`: the framer skips it,
   * and it goes on as it came when its line did.
   */
  private crDue: boolean | null = null;

  constructor(
    private readonly filter: MethodFilter,
    private readonly maxLineBytes: number,
    private readonly onRefused: (r: Refusal) => void,
    private readonly onOversize: (limit: number) => void,
  ) {
    this.framer = new LineFramer({ maxLineBytes });
  }

  /**
   * A line left incomplete by the previous read (or a `\r` whose `\n` may follow) is finished
   * through the framer with this chunk's bytes up to its first newline; from there the chunk is
   * at a line boundary and, when small enough that none of its lines can be oversize, goes on in
   * byte ranges: only its lines with a `\u` escape are cut out and judged (see scanChunk), those
   * among them with a lone `\r` through the framer, which ends a line there as the target does. A
   * chunk holding a refused name goes through the framer, line by line.
   */
  push(chunk: Buffer): Uint8Array[] {
    const framer = this.framer;
    const out: Uint8Array[] = [];
    if (chunk.length === 0) return out;
    if (this.crDue !== null) {
      if (this.crDue && chunk[0] === 0x0a) out.push(LF);
      this.crDue = null;
    }
    let body = chunk;
    if (!framer.idle) {
      const nl = chunk.indexOf(0x0a);
      const head = nl < 0 ? chunk : chunk.subarray(0, nl + 1);
      this.collect(framer.push(head), out, true, head);
      body = chunk.subarray(head.length);
    }
    if (body.length > 0) {
      const scan = body.length <= this.maxLineBytes ? this.filter.scanChunk(body) : null;
      if (scan === null) this.collect(framer.push(body), out, true, body);
      else {
        for (const part of scan.parts) {
          if (part.kind === 'clean') out.push(part.bytes);
          else if (part.line.indexOf(0x0d) >= 0) {
            // Lone CRs end lines for the target: each line judged, refused or forwarded on its own.
            const whole = body.subarray(
              part.line.byteOffset - body.byteOffset,
              part.newline.byteOffset - body.byteOffset + part.newline.length,
            );
            this.collect(framer.push(whole), out, true, whole);
          } else if (this.passes(this.filter.judge(part.line, true))) out.push(part.line, part.newline);
        }
        // After the last newline, lines a lone CR ends are complete: judged now, not held back.
        if (scan.rest.length > 0) this.collect(framer.push(scan.rest), out, true, scan.rest);
      }
    }
    if (chunk[chunk.length - 1] !== 0x0d) this.crDue = null;
    return out;
  }

  /** The guest ended its side: its last line may lack its newline, and goes on as it came. */
  end(): Uint8Array[] {
    const out: Uint8Array[] = [];
    this.collect(this.framer.end(), out, false);
    return out;
  }

  private passes(verdict: Verdict): boolean {
    if (verdict.forward) return true;
    this.onRefused(verdict);
    return false;
  }

  /**
   * Adds to `out` the lines the filter lets through, in order. The refused names are searched for
   * once in `chunk` (what was read), not in each line of it: a line that lies inside a chunk
   * without them holds none either. A line that began in an earlier chunk is a copy, not inside
   * `chunk`, and is searched on its own.
   */
  private collect(frames: Frame[], out: Uint8Array[], terminated: boolean, chunk?: Buffer): void {
    const clean = chunk !== undefined && frames.length > 1 && this.filter.noRefusedName(chunk);
    for (const frame of frames) {
      if (frame.kind === 'oversize') {
        this.crDue = null;
        this.onOversize(frame.limit);
        continue;
      }
      const inside =
        clean &&
        frame.bytes.buffer === chunk.buffer &&
        frame.bytes.byteOffset >= chunk.byteOffset &&
        frame.bytes.byteOffset + frame.bytes.byteLength <= chunk.byteOffset + chunk.byteLength;
      const forwarded = this.passes(this.filter.judge(frame.bytes, inside));
      if (forwarded) {
        out.push(frame.bytes);
        if (terminated) out.push(frame.end === 'crlf' ? CRLF : frame.end === 'cr' ? CR : LF);
      }
      this.crDue = frame.end === 'cr' ? forwarded : null;
    }
  }
}

import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  DEFAULT_MAX_LINE_BYTES,
  decodeLine,
  encodeLine,
  endFrames,
  type Frame,
  frameChunk,
  initialFramerState,
  LineFramer,
} from '../src/framing.js';

const LF = 0x0a;
const CR = 0x0d;

/** `eol` is how the line ended; a `\r\n` split between chunks ends at the `\r`, so both count as `cr`. */
type Simple = { kind: 'line'; text: number[]; eol: 'lf' | 'cr' } | { kind: 'oversize' };

function simplify(frames: readonly Frame[]): Simple[] {
  return frames.map((f) =>
    f.kind === 'line' ? { kind: 'line', text: [...f.bytes], eol: f.end === 'lf' ? 'lf' : 'cr' } : { kind: 'oversize' },
  );
}

/**
 * The reference, as Java's BufferedReader.readLine splits the whole input: a line ends at `\n`,
 * at `\r`, or at `\r\n` (one line end); one frame per line; the unterminated tail at the end.
 */
function reference(input: Uint8Array, max: number): Simple[] {
  const out: Simple[] = [];
  let seg: number[] = [];
  const push = (eol: 'lf' | 'cr') =>
    out.push(seg.length > max ? { kind: 'oversize' } : { kind: 'line', text: seg, eol });
  for (let i = 0; i < input.length; i++) {
    const b = input[i]!;
    if (b === LF || b === CR) {
      push(b === LF ? 'lf' : 'cr');
      seg = [];
      if (b === CR && input[i + 1] === LF) i++;
    } else seg.push(b);
  }
  if (seg.length > 0) push('lf');
  return out;
}

/** Splits `input` at the given cut points (any order, any duplicates). */
function splitAt(input: Uint8Array, cuts: number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let prev = 0;
  for (const p of [...points, input.length]) {
    chunks.push(input.subarray(prev, p));
    prev = p;
  }
  return chunks;
}

function frameAll(chunks: Uint8Array[], max: number): { frames: Frame[]; maxBuffered: number } {
  let state = initialFramerState();
  const frames: Frame[] = [];
  let maxBuffered = 0;
  for (const chunk of chunks) {
    const r = frameChunk(state, chunk, { maxLineBytes: max });
    state = r.state;
    frames.push(...r.frames);
    maxBuffered = Math.max(maxBuffered, state.pendingBytes);
  }
  frames.push(...endFrames(state));
  return { frames, maxBuffered };
}

// Bytes biased towards the interesting ones: LF, CR and multi-byte UTF-8 lead/continuation bytes.
const byte = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 255 }) },
  { weight: 1, arbitrary: fc.constantFrom(LF, CR, 0xe2, 0x82, 0xac, 0xf0, 0x9f) },
);

describe('frameChunk', () => {
  it('matches the whole-input reference however the input is split', () => {
    fc.assert(
      fc.property(
        fc.array(byte, { maxLength: 400 }).map((a) => Uint8Array.from(a)),
        fc.array(fc.nat(), { maxLength: 30 }),
        fc.integer({ min: 0, max: 40 }),
        (input, cuts, max) => {
          const { frames, maxBuffered } = frameAll(splitAt(input, cuts), max);
          expect(simplify(frames)).toEqual(reference(input, max));
          // The buffer is bounded by the limit.
          expect(maxBuffered).toBeLessThanOrEqual(max);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('draws the limit exactly, for lines around it split anywhere', () => {
    const max = 6;
    const line = fc.tuple(
      fc.integer({ min: max - 1, max: max + 2 }),
      fc.constantFrom('\n', '\r\n', '\r'),
      fc.constantFrom(0x41, CR),
    );
    fc.assert(
      fc.property(
        fc.array(line, { minLength: 1, maxLength: 6 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (lines, cuts) => {
          const text = lines.map(([n, eol, fill]) => String.fromCharCode(fill).repeat(n) + eol).join('');
          const input = new TextEncoder().encode(text);
          expect(simplify(frameAll(splitAt(input, cuts), max).frames)).toEqual(reference(input, max));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('gives the same frames for one chunk and for one byte at a time', () => {
    fc.assert(
      fc.property(fc.array(byte, { maxLength: 300 }), (bytes) => {
        const input = Uint8Array.from(bytes);
        const whole = frameAll([input], 64).frames;
        const single = frameAll(
          [...input].map((b) => Uint8Array.of(b)),
          64,
        ).frames;
        expect(simplify(single)).toEqual(simplify(whole));
      }),
    );
  });

  it('round-trips arbitrary Unicode lines split inside multi-byte characters', () => {
    const line = fc.string({ unit: 'grapheme', maxLength: 30 }).filter((s) => !s.includes('\n') && !s.includes('\r'));
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 40 }),
        fc.constantFrom('\n', '\r\n', '\r'),
        (lines, cuts, eol) => {
          const text = lines.map((l) => l + eol).join('');
          const input = new TextEncoder().encode(text);
          const { frames } = frameAll(splitAt(input, cuts), DEFAULT_MAX_LINE_BYTES);
          expect(frames.map((f) => (f.kind === 'line' ? decodeLine(f.bytes) : null))).toEqual(lines);
          expect(frames.every((f) => f.kind === 'line' && (f.end === 'lf') === (eol === '\n'))).toBe(true);
        },
      ),
    );
  });

  it('reports an over-long line once, as soon as it is over the limit, and keeps the next line', () => {
    const framer = new LineFramer({ maxLineBytes: 8 });
    expect(framer.push(new TextEncoder().encode('12345678'))).toEqual([]);
    expect(framer.bufferedBytes).toBe(8);
    expect(framer.push(new TextEncoder().encode('9'))).toEqual([{ kind: 'oversize', limit: 8 }]);
    expect(framer.bufferedBytes).toBe(0);
    // The rest of the over-long line is dropped without buffering or a second report.
    expect(framer.push(new Uint8Array(100_000).fill(0x41))).toEqual([]);
    expect(framer.bufferedBytes).toBe(0);
    const frames = framer.push(new TextEncoder().encode('tail\nok\r\n'));
    expect(simplify(frames)).toEqual([{ kind: 'line', text: [...new TextEncoder().encode('ok')], eol: 'cr' }]);
  });

  it('accepts a line of exactly the limit, with either terminator', () => {
    const framer = new LineFramer({ maxLineBytes: 4 });
    const frames = framer.push(new TextEncoder().encode('abcd\r\nefgh\nijklm\n'));
    expect(frames.map((f) => (f.kind === 'line' ? decodeLine(f.bytes) : f.kind))).toEqual(['abcd', 'efgh', 'oversize']);
  });

  it('reports empty lines as empty frames (the daemon answers them)', () => {
    const frames = new LineFramer().push(new TextEncoder().encode('\n\r\n\r'));
    expect(frames).toEqual([
      { kind: 'line', bytes: new Uint8Array(0), crlf: false, end: 'lf' },
      { kind: 'line', bytes: new Uint8Array(0), crlf: true, end: 'crlf' },
      { kind: 'line', bytes: new Uint8Array(0), crlf: false, end: 'cr' },
    ]);
  });

  it('ends a line at a lone CR at once, and takes a CR then LF split between chunks as one line end', () => {
    const framer = new LineFramer();
    const text = (frames: Frame[]) =>
      frames.map((f) => (f.kind === 'line' ? `${decodeLine(f.bytes)}/${f.end}` : f.kind));
    expect(text(framer.push(new TextEncoder().encode('{"id":1}\r{"id":2}\r')))).toEqual(['{"id":1}/cr', '{"id":2}/cr']);
    expect(framer.idle).toBe(false); // a \n may still belong to that line end
    expect(text(framer.push(new TextEncoder().encode('\n{"id":3}\r\n')))).toEqual(['{"id":3}/crlf']);
    expect(framer.idle).toBe(true);
    expect(text(framer.push(new TextEncoder().encode('\r')))).toEqual(['/cr']);
    expect(text(framer.push(new TextEncoder().encode('x\n')))).toEqual(['x/lf']);
  });

  it('drops an over-long line up to a lone CR too', () => {
    const framer = new LineFramer({ maxLineBytes: 4 });
    const frames = framer.push(new TextEncoder().encode('123456\rok\n'));
    expect(frames.map((f) => (f.kind === 'line' ? decodeLine(f.bytes) : f.kind))).toEqual(['oversize', 'ok']);
  });

  it('hands out the unterminated tail only at the end of the input', () => {
    const framer = new LineFramer();
    expect(framer.push(new TextEncoder().encode('{"id":1}\n{"id"'))).toHaveLength(1);
    expect(framer.push(new TextEncoder().encode(':2}'))).toEqual([]);
    const tail = framer.end();
    expect(tail.map((f) => (f.kind === 'line' ? decodeLine(f.bytes) : null))).toEqual(['{"id":2}']);
    expect(framer.end()).toEqual([]);
  });
});

describe('LineFramer', () => {
  // push() takes a shortcut for a chunk that is exactly one LF-terminated line at a line boundary
  // (the usual request): whole lines as chunks hit it, cuts inside lines and CRs take the loop.
  it('matches the whole-input reference however the input is split, shortcut or not', () => {
    const line = fc.tuple(
      fc.array(byte, { maxLength: 12 }).map((a) => a.filter((b) => b !== LF)),
      fc.constantFrom([LF], [LF], [CR, LF], [CR]),
    );
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 12 }),
        fc.boolean(),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.integer({ min: 0, max: 10 }),
        (lines, byLine, cuts, max) => {
          const parts = lines.map(([body, eol]) => Uint8Array.from([...body, ...eol]));
          const input = Uint8Array.from(parts.flatMap((p) => [...p]));
          const framer = new LineFramer({ maxLineBytes: max });
          const frames: Frame[] = [];
          for (const chunk of byLine ? parts : splitAt(input, cuts)) {
            frames.push(...framer.push(chunk));
            expect(framer.bufferedBytes).toBeLessThanOrEqual(max);
          }
          frames.push(...framer.end());
          expect(simplify(frames)).toEqual(reference(input, max));
          expect(framer.idle).toBe(true);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('takes a chunk of one line as a view of it, and a CR before the LF still ends the line once', () => {
    const framer = new LineFramer({ maxLineBytes: 8 });
    const chunk = new TextEncoder().encode('{"a":1}\n');
    const [frame] = framer.push(chunk);
    expect(frame).toMatchObject({ kind: 'line', end: 'lf', crlf: false });
    expect(frame?.kind === 'line' && frame.bytes.buffer).toBe(chunk.buffer);
    expect(simplify(framer.push(new TextEncoder().encode('ab\r\n')))).toEqual([
      { kind: 'line', text: [0x61, 0x62], eol: 'cr' },
    ]);
    // One byte over the limit is an oversize line, not a line.
    expect(simplify(framer.push(new TextEncoder().encode('123456789\n')))).toEqual([{ kind: 'oversize' }]);
  });
});

describe('decodeLine and encodeLine', () => {
  it('rejects invalid UTF-8 instead of guessing', () => {
    expect(decodeLine(Uint8Array.of(0x7b, 0xc3, 0x28, 0x7d))).toBeNull();
    expect(decodeLine(Uint8Array.of(0xe2, 0x82))).toBeNull();
    expect(decodeLine(new TextEncoder().encode('€ ok'))).toBe('€ ok');
  });

  it('writes any JSON value as exactly one line', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const line = encodeLine(value);
        expect(line.endsWith('\n')).toBe(true);
        expect(line.indexOf('\n')).toBe(line.length - 1);
        expect(JSON.parse(line)).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });
});

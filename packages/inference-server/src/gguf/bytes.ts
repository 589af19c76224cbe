/** The little-endian byte writer and the metadata encoding of the GGUF model writer. */
import { align, GgufValueType } from './format.js';

export type MetaValue =
  | { t: 'str'; v: string }
  | { t: 'u32'; v: number }
  | { t: 'f32'; v: number }
  | { t: 'bool'; v: boolean }
  | { t: 'strs'; v: readonly string[] }
  | { t: 'f32s'; v: readonly number[] }
  | { t: 'i32s'; v: readonly number[] };

export class ByteWriter {
  private buf = Buffer.alloc(1 << 16);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = Buffer.alloc(Math.max(this.buf.length * 2, this.length + n));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
  u32(v: number): void {
    this.room(4);
    this.buf.writeUInt32LE(v >>> 0, this.length);
    this.length += 4;
  }
  i32(v: number): void {
    this.room(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  u64(v: number): void {
    this.room(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  f32(v: number): void {
    this.room(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  u8(v: number): void {
    this.room(1);
    this.buf[this.length++] = v;
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.room(b.length);
    b.copy(this.buf, this.length);
    this.length += b.length;
  }
  pad(to: number): void {
    const n = align(this.length, to) - this.length;
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

export function writeMeta(w: ByteWriter, key: string, value: MetaValue): void {
  w.str(key);
  switch (value.t) {
    case 'str':
      w.u32(GgufValueType.STRING);
      w.str(value.v);
      break;
    case 'u32':
      w.u32(GgufValueType.UINT32);
      w.u32(value.v);
      break;
    case 'f32':
      w.u32(GgufValueType.FLOAT32);
      w.f32(value.v);
      break;
    case 'bool':
      w.u32(GgufValueType.BOOL);
      w.u8(value.v ? 1 : 0);
      break;
    case 'strs':
      w.u32(GgufValueType.ARRAY);
      w.u32(GgufValueType.STRING);
      w.u64(value.v.length);
      for (const s of value.v) w.str(s);
      break;
    case 'f32s':
      w.u32(GgufValueType.ARRAY);
      w.u32(GgufValueType.FLOAT32);
      w.u64(value.v.length);
      for (const x of value.v) w.f32(x);
      break;
    case 'i32s':
      w.u32(GgufValueType.ARRAY);
      w.u32(GgufValueType.INT32);
      w.u64(value.v.length);
      for (const x of value.v) w.i32(x);
      break;
  }
}

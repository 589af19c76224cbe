/**
 * A reader that checks a GGUF file's header, metadata and tensor table in JavaScript before the
 * native loader sees it (a malformed file can abort the whole process inside llama.cpp).
 */
import { type FileHandle, open, stat } from 'node:fs/promises';
import { GgufError } from '../errors.js';
import { align, GGML_TYPE_SIZES, GGUF_MAGIC, GgufValueType } from './format.js';

export interface GgufTensorInfo {
  readonly name: string;
  readonly dims: readonly number[];
  readonly type: number;
  readonly offset: number;
}

export interface GgufSummary {
  readonly version: number;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly tensors: readonly GgufTensorInfo[];
  readonly dataOffset: number;
  readonly fileSize: number;
}

const MAX_HEADER_BYTES = 512 * 1024 * 1024;
const MAX_COUNT = 1e8;

/** A bounds-checked cursor over the header of a file, reading more of it as needed. */
class HeaderReader {
  private buf = Buffer.alloc(0);
  private start = 0;
  pos = 0;
  constructor(
    private readonly fh: FileHandle,
    private readonly size: number,
  ) {}
  private async need(n: number): Promise<void> {
    if (this.pos + n > this.size) throw new GgufError(`truncated header (needs byte ${this.pos + n} of ${this.size})`);
    if (this.pos + n > MAX_HEADER_BYTES) throw new GgufError('header larger than 512 MiB');
    if (this.pos + n <= this.start + this.buf.length) return;
    const len = Math.min(this.size - this.pos, Math.max(n, 4 << 20));
    const b = Buffer.alloc(len);
    const { bytesRead } = await this.fh.read(b, 0, len, this.pos);
    if (bytesRead < n) throw new GgufError('short read');
    this.buf = b.subarray(0, bytesRead);
    this.start = this.pos;
  }
  private at(): number {
    return this.pos - this.start;
  }
  async u8(): Promise<number> {
    await this.need(1);
    const v = this.buf[this.at()]!;
    this.pos += 1;
    return v;
  }
  async u32(): Promise<number> {
    await this.need(4);
    const v = this.buf.readUInt32LE(this.at());
    this.pos += 4;
    return v;
  }
  async u64(): Promise<number> {
    await this.need(8);
    const v = this.buf.readBigUInt64LE(this.at());
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufError('64-bit value out of range');
    return Number(v);
  }
  async scalar(type: number): Promise<unknown> {
    const sizes: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
    const n = sizes[type];
    if (n === undefined) throw new GgufError(`unknown metadata value type ${type}`);
    await this.need(n);
    const o = this.at();
    const b = this.buf;
    this.pos += n;
    switch (type) {
      case 0:
        return b.readUInt8(o);
      case 1:
        return b.readInt8(o);
      case 2:
        return b.readUInt16LE(o);
      case 3:
        return b.readInt16LE(o);
      case 4:
        return b.readUInt32LE(o);
      case 5:
        return b.readInt32LE(o);
      case 6:
        return b.readFloatLE(o);
      case 7:
        return b[o] !== 0;
      case 10:
        return b.readBigUInt64LE(o);
      case 11:
        return b.readBigInt64LE(o);
      default:
        return b.readDoubleLE(o);
    }
  }
  async str(): Promise<string> {
    const len = await this.u64();
    if (len > 64 * 1024 * 1024) throw new GgufError(`string of ${len} bytes`);
    await this.need(len);
    const s = this.buf.toString('utf8', this.at(), this.at() + len);
    this.pos += len;
    return s;
  }
  async value(type: number): Promise<unknown> {
    if (type === GgufValueType.STRING) return this.str();
    if (type === GgufValueType.ARRAY) {
      const inner = await this.u32();
      const count = await this.u64();
      if (count > MAX_COUNT) throw new GgufError(`array of ${count} elements`);
      if (inner === GgufValueType.ARRAY) throw new GgufError('nested arrays are not supported');
      const out: unknown[] = [];
      for (let i = 0; i < count; i++) out.push(await this.value(inner));
      return out;
    }
    return this.scalar(type);
  }
}

/**
 * Reads and checks a GGUF file's header: magic, version, metadata, tensor table, and that every
 * tensor's data lies inside the file. Throws GgufError with a one-line reason.
 */
export async function readGgufSummary(path: string): Promise<GgufSummary> {
  const size = (await stat(path)).size;
  const fh = await open(path, 'r');
  try {
    const r = new HeaderReader(fh, size);
    if (size < 24) throw new GgufError(`not a GGUF file (${size} bytes)`);
    if ((await r.u32()) !== GGUF_MAGIC) throw new GgufError('not a GGUF file (bad magic)');
    const version = await r.u32();
    if (version < 2 || version > 3) throw new GgufError(`unsupported GGUF version ${version}`);
    const tensorCount = await r.u64();
    const kvCount = await r.u64();
    if (tensorCount > 1e6 || kvCount > 1e6) throw new GgufError('implausible tensor or key count');
    const metadata: Record<string, unknown> = {};
    for (let i = 0; i < kvCount; i++) {
      const key = await r.str();
      const type = await r.u32();
      metadata[key] = await r.value(type);
    }
    const tensors: GgufTensorInfo[] = [];
    for (let i = 0; i < tensorCount; i++) {
      const name = await r.str();
      const nDims = await r.u32();
      if (nDims < 1 || nDims > 4) throw new GgufError(`tensor ${name} has ${nDims} dimensions`);
      const dims: number[] = [];
      for (let d = 0; d < nDims; d++) dims.push(await r.u64());
      const type = await r.u32();
      const offset = await r.u64();
      tensors.push({ name, dims, type, offset });
    }
    const alignment =
      typeof metadata['general.alignment'] === 'number' ? (metadata['general.alignment'] as number) : 32;
    if (alignment <= 0 || (alignment & (alignment - 1)) !== 0) throw new GgufError(`bad alignment ${alignment}`);
    const dataOffset = align(r.pos, alignment);
    for (const t of tensors) {
      if (t.offset % alignment !== 0) throw new GgufError(`tensor ${t.name} is not aligned`);
      const sizes = GGML_TYPE_SIZES[t.type];
      if (!sizes) continue;
      const elements = t.dims.reduce((a, b) => a * b, 1);
      if (t.dims[0]! % sizes[0] !== 0) throw new GgufError(`tensor ${t.name}: row not a whole number of blocks`);
      const bytes = (elements / sizes[0]) * sizes[1];
      if (dataOffset + t.offset + bytes > size) {
        throw new GgufError(`tensor ${t.name} lies beyond the end of the file (file truncated?)`);
      }
    }
    return { version, metadata, tensors, dataOffset, fileSize: size };
  } finally {
    await fh.close();
  }
}

/**
 * The checks llama.cpp's loader relies on for a llama-family model, made in JavaScript so that a
 * malformed file is refused with a clear message rather than aborting the process.
 */
export function checkModelSummary(s: GgufSummary): void {
  const m = s.metadata;
  const arch = m['general.architecture'];
  if (typeof arch !== 'string' || arch === '') throw new GgufError('general.architecture is missing');
  if (!Array.isArray(m['tokenizer.ggml.tokens'])) throw new GgufError('tokenizer.ggml.tokens is missing');
  if (typeof m['tokenizer.ggml.model'] !== 'string') throw new GgufError('tokenizer.ggml.model is missing');
  for (const k of ['context_length', 'embedding_length', 'block_count']) {
    const v = m[`${arch}.${k}`];
    if (typeof v !== 'number' && typeof v !== 'bigint') throw new GgufError(`${arch}.${k} is missing`);
  }
  if (s.tensors.length === 0) throw new GgufError('the file has no tensors');
  const names = new Set(s.tensors.map((t) => t.name));
  if (!names.has('token_embd.weight')) throw new GgufError('tensor token_embd.weight is missing');
}

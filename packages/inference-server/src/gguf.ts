/**
 * GGUF: a writer of llama models with deterministic pseudo-random weights (`make-model`), and a
 * reader that checks a file's header, metadata and tensor table in JavaScript before the native
 * loader sees it (a malformed file can abort the whole process inside llama.cpp).
 *
 * GGUF v3 layout: magic "GGUF", version, tensor count, key-value count, the key-values, the
 * tensor infos (name, dimensions with ne[0] the fastest-moving, ggml type, offset), padding to
 * `general.alignment`, then the tensor data, each tensor at an aligned offset.
 */
import { open, stat } from 'node:fs/promises';

export const GGUF_MAGIC = 0x46554747; // "GGUF" little-endian
export const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT = 32;

/** GGUF metadata value types. */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** The ggml tensor types this writer produces. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type WeightType = 'f32' | 'f16' | 'q8_0';
export const WEIGHT_TYPES: readonly WeightType[] = ['f32', 'f16', 'q8_0'];

/**
 * Block size (elements) and bytes per block of ggml's tensor types, for checking that every
 * tensor of a file lies inside it. Types not listed are accepted without that check.
 */
const GGML_TYPE_SIZES: Readonly<Record<number, readonly [block: number, bytes: number]>> = {
  0: [1, 4], // F32
  1: [1, 2], // F16
  2: [32, 18], // Q4_0
  3: [32, 20], // Q4_1
  6: [32, 22], // Q5_0
  7: [32, 24], // Q5_1
  8: [32, 34], // Q8_0
  9: [32, 36], // Q8_1
  10: [256, 84], // Q2_K
  11: [256, 110], // Q3_K
  12: [256, 144], // Q4_K
  13: [256, 176], // Q5_K
  14: [256, 210], // Q6_K
  15: [256, 292], // Q8_K
  16: [256, 66], // IQ2_XXS
  17: [256, 74], // IQ2_XS
  18: [256, 98], // IQ3_XXS
  19: [256, 50], // IQ1_S
  20: [32, 18], // IQ4_NL
  21: [256, 110], // IQ3_S
  22: [256, 82], // IQ2_S
  23: [256, 136], // IQ4_XS
  24: [1, 1], // I8
  25: [1, 2], // I16
  26: [1, 4], // I32
  27: [1, 8], // I64
  28: [1, 8], // F64
  29: [256, 56], // IQ1_M
  30: [1, 2], // BF16
  34: [256, 54], // TQ1_0
  35: [256, 66], // TQ2_0
  39: [32, 17], // MXFP4
};

// ---------------------------------------------------------------------------------------------
// Presets and vocabulary

export type PresetName = 'tiny' | 'small' | '1b';
export const PRESET_NAMES: readonly PresetName[] = ['tiny', 'small', '1b'];

export interface ModelShape {
  readonly nVocab: number;
  readonly nEmbd: number;
  readonly nLayer: number;
  readonly nHead: number;
  readonly nHeadKv: number;
  readonly nFf: number;
  readonly contextLength: number;
}

export const PRESETS: Readonly<Record<PresetName, ModelShape>> = {
  // ~0.13 M parameters: a fraction of a megabyte, ~1,000 tokens/s on one core.
  tiny: { nVocab: 512, nEmbd: 64, nLayer: 2, nHead: 4, nHeadKv: 4, nFf: 128, contextLength: 32768 },
  // ~98 M parameters.
  small: { nVocab: 8192, nEmbd: 768, nLayer: 12, nHead: 12, nHeadKv: 12, nFf: 2048, contextLength: 4096 },
  // ~1.0 B parameters.
  '1b': { nVocab: 32000, nEmbd: 2048, nLayer: 18, nHead: 16, nHeadKv: 16, nFf: 5632, contextLength: 4096 },
};

export function parameterCount(s: ModelShape): number {
  const headDim = s.nEmbd / s.nHead;
  const kv = headDim * s.nHeadKv;
  const perLayer = 2 * s.nEmbd + 2 * s.nEmbd * s.nEmbd + 2 * s.nEmbd * kv + 3 * s.nEmbd * s.nFf;
  return 2 * s.nVocab * s.nEmbd + s.nEmbd + s.nLayer * perLayer;
}

/** SentencePiece token types as GGUF stores them. */
const TokenType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, BYTE: 6 } as const;

export interface Vocabulary {
  readonly tokens: string[];
  readonly scores: number[];
  readonly types: number[];
  readonly unk: number;
  readonly bos: number;
  readonly eos: number;
  readonly imStart: number;
  readonly imEnd: number;
  /** Tokens the generated model never produces: special tokens and bytes that are not printable ASCII. */
  readonly silent: ReadonlySet<number>;
}

const COMMON_WORDS =
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part hello world model local server answer ready ping pong test token fast small quiet light river stone cloud green blue red house tree open close start stop good new old great little own right big high different following large next early young important few public bad same able'.split(
    ' ',
  );

/**
 * A byte-fallback SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the ChatML markers, the
 * 256 byte tokens, printable characters, common words (with every prefix, so that the
 * tokenizer's pairwise merges reach them) and then letter combinations up to `size`.
 */
export function buildVocabulary(size: number): Vocabulary {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  const seen = new Set<string>();
  const add = (t: string, type: number, score = 0) => {
    if (tokens.length >= size || seen.has(t)) return;
    seen.add(t);
    tokens.push(t);
    scores.push(score);
    types.push(type);
  };
  add('<unk>', TokenType.UNKNOWN);
  add('<s>', TokenType.CONTROL);
  add('</s>', TokenType.CONTROL);
  add('<|im_start|>', TokenType.CONTROL);
  add('<|im_end|>', TokenType.CONTROL);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, TokenType.BYTE);
  const piece = (t: string) => add(t, TokenType.NORMAL, -tokens.length);
  piece('▁');
  for (let c = 0x21; c < 0x7f; c++) piece(String.fromCharCode(c));
  for (const w of COMMON_WORDS) {
    for (let i = 2; i <= w.length + 1; i++) piece(`▁${w}`.slice(0, i));
  }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const combos = function* (n: number): Generator<string> {
    if (n === 0) {
      yield '';
      return;
    }
    for (const head of combos(n - 1)) for (const c of letters) yield head + c;
  };
  for (let n = 1; tokens.length < size && n <= 4; n++) {
    for (const s of combos(n)) {
      piece(`▁${s}`);
      if (n > 1) piece(s);
      if (tokens.length >= size) break;
    }
  }
  if (tokens.length < size) throw new Error(`cannot build a vocabulary of ${size} tokens`);
  const silent = new Set<number>();
  types.forEach((type, id) => {
    if (type === TokenType.CONTROL || type === TokenType.UNKNOWN) silent.add(id);
    if (type === TokenType.BYTE) {
      const b = id - 5;
      if (b < 0x20 || b > 0x7e) silent.add(id);
    }
  });
  return { tokens, scores, types, unk: 0, bos: 1, eos: 2, imStart: 3, imEnd: 4, silent };
}

/** ChatML, as Qwen and many others use it. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random numbers

/** FNV-1a, 32 bits. */
function hash32(text: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** xorshift128: 32-bit integers, the same on every platform for the same seed. */
class Xorshift128 {
  private x: number;
  private y: number;
  private z: number;
  private w: number;
  constructor(seed: number) {
    // splitmix32 to spread the seed over the state; never all zero.
    let s = seed >>> 0;
    const next = () => {
      s = (s + 0x9e3779b9) >>> 0;
      let t = s ^ (s >>> 16);
      t = Math.imul(t, 0x21f0aaad);
      t ^= t >>> 15;
      t = Math.imul(t, 0x735a2d97);
      return (t ^ (t >>> 15)) >>> 0;
    };
    this.x = next();
    this.y = next();
    this.z = next();
    this.w = next() | 1;
  }
  next(): number {
    const t = this.x ^ (this.x << 11);
    this.x = this.y;
    this.y = this.z;
    this.z = this.w;
    this.w = (this.w ^ (this.w >>> 19) ^ (t ^ (t >>> 8))) >>> 0;
    return this.w;
  }
}

// ---------------------------------------------------------------------------------------------
// Half precision

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 binary16 bits of a number (round to nearest even). */
export function toHalf(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rest > mid || (rest === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && half & 1)) half++;
  e = half >>> 10;
  return sign | half;
}

export function fromHalf(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

// ---------------------------------------------------------------------------------------------
// Writer

interface TensorPlan {
  readonly name: string;
  readonly dims: readonly number[];
  readonly type: number;
  readonly bytes: number;
  offset: number;
  /** 'ones': a norm weight; 'random': uniform in ±limit; rows listed in `zeroRows` are zero. */
  readonly fill: 'ones' | 'random';
  readonly limit: number;
  readonly zeroRows?: ReadonlySet<number>;
}

function tensorBytes(type: number, elements: number): number {
  if (type === GgmlType.F32) return elements * 4;
  if (type === GgmlType.F16) return elements * 2;
  return (elements / 32) * 34;
}

const align = (n: number, a = GGUF_ALIGNMENT) => Math.ceil(n / a) * a;

type MetaValue =
  | { t: 'str'; v: string }
  | { t: 'u32'; v: number }
  | { t: 'f32'; v: number }
  | { t: 'bool'; v: boolean }
  | { t: 'strs'; v: readonly string[] }
  | { t: 'f32s'; v: readonly number[] }
  | { t: 'i32s'; v: readonly number[] };

class ByteWriter {
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

function writeMeta(w: ByteWriter, key: string, value: MetaValue): void {
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

export interface MakeModelOptions {
  readonly out: string;
  readonly preset?: PresetName;
  readonly seed?: number;
  readonly type?: WeightType;
  /** Called with bytes written so far and the total, at most a few hundred times. */
  readonly onProgress?: (written: number, total: number) => void;
}

export interface MakeModelResult {
  readonly path: string;
  readonly bytes: number;
  readonly parameters: number;
  readonly preset: PresetName;
  readonly type: WeightType;
  readonly seed: number;
}

const TYPE_IDS: Readonly<Record<WeightType, number>> = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0 };
/** general.file_type: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0. */
const FILE_TYPES: Readonly<Record<WeightType, number>> = { f32: 0, f16: 1, q8_0: 7 };

/** Plans the tensors of a llama model of the given shape. */
function planTensors(shape: ModelShape, type: WeightType, silent: ReadonlySet<number>): TensorPlan[] {
  const t = TYPE_IDS[type];
  const headDim = shape.nEmbd / shape.nHead;
  const kv = headDim * shape.nHeadKv;
  const plans: TensorPlan[] = [];
  const matrix = (name: string, cols: number, rows: number, extra: Partial<TensorPlan> = {}) =>
    plans.push({
      name,
      dims: [cols, rows],
      type: t,
      bytes: tensorBytes(t, cols * rows),
      offset: 0,
      fill: 'random',
      // Uniform with standard deviation 1/sqrt(fan-in): activations keep their scale.
      limit: Math.sqrt(3 / cols),
      ...extra,
    });
  const norm = (name: string) =>
    plans.push({
      name,
      dims: [shape.nEmbd],
      type: GgmlType.F32,
      bytes: shape.nEmbd * 4,
      offset: 0,
      fill: 'ones',
      limit: 0,
    });
  matrix('token_embd.weight', shape.nEmbd, shape.nVocab, { limit: 1 });
  for (let i = 0; i < shape.nLayer; i++) {
    norm(`blk.${i}.attn_norm.weight`);
    matrix(`blk.${i}.attn_q.weight`, shape.nEmbd, shape.nEmbd);
    matrix(`blk.${i}.attn_k.weight`, shape.nEmbd, kv);
    matrix(`blk.${i}.attn_v.weight`, shape.nEmbd, kv);
    matrix(`blk.${i}.attn_output.weight`, shape.nEmbd, shape.nEmbd);
    norm(`blk.${i}.ffn_norm.weight`);
    matrix(`blk.${i}.ffn_gate.weight`, shape.nEmbd, shape.nFf);
    matrix(`blk.${i}.ffn_up.weight`, shape.nEmbd, shape.nFf);
    matrix(`blk.${i}.ffn_down.weight`, shape.nFf, shape.nEmbd);
  }
  norm('output_norm.weight');
  // Special tokens and unprintable bytes get all-zero output rows: their logit is exactly 0 while
  // hundreds of others are random around 0, so the model (practically) never emits them and its
  // output is printable text that runs until max_tokens or a stop string.
  matrix('output.weight', shape.nEmbd, shape.nVocab, { zeroRows: silent, limit: Math.sqrt(3 / shape.nEmbd) * 4 });
  let offset = 0;
  for (const p of plans) {
    p.offset = offset;
    offset = align(offset + p.bytes);
  }
  return plans;
}

/**
 * Fills `out` with the data of one tensor, rows `[row0, row0 + rows)`. Weights are k·scale with
 * k a uniform integer in [-127, 127] and scale the f16 nearest to limit/127, so that f32, f16 and
 * q8_0 files of one seed hold (nearly) the same model.
 */
function fillRows(p: TensorPlan, rng: Xorshift128, row0: number, rows: number, out: Buffer): number {
  const cols = p.dims[0]!;
  let at = 0;
  if (p.fill === 'ones') {
    for (let i = 0; i < cols; i++) at = out.writeFloatLE(1, at);
    return at;
  }
  const scaleHalf = toHalf(p.limit / 127);
  const scale = fromHalf(scaleHalf);
  const q = new Int8Array(cols);
  const table = halfTable(scaleHalf);
  for (let r = row0; r < row0 + rows; r++) {
    const zero = p.zeroRows?.has(r) === true;
    for (let c = 0; c < cols; c++) {
      const k = (rng.next() % 255) - 127;
      q[c] = zero ? 0 : k;
    }
    if (p.type === GgmlType.F32) {
      for (let c = 0; c < cols; c++) at = out.writeFloatLE(q[c]! * scale, at);
    } else if (p.type === GgmlType.F16) {
      for (let c = 0; c < cols; c++) {
        const h = table[q[c]! + 127]!;
        out[at++] = h & 0xff;
        out[at++] = h >>> 8;
      }
    } else {
      for (let c = 0; c < cols; c += 32) {
        out[at++] = scaleHalf & 0xff;
        out[at++] = scaleHalf >>> 8;
        for (let j = 0; j < 32; j++) out[at++] = q[c + j]! & 0xff;
      }
    }
  }
  return at;
}

/** f16 bits of k·scale for k in [-127, 127], per scale (a few distinct scales per model). */
const halfTables = new Map<number, Uint16Array>();
function halfTable(scaleHalf: number): Uint16Array {
  let t = halfTables.get(scaleHalf);
  if (!t) {
    const scale = fromHalf(scaleHalf);
    t = new Uint16Array(255);
    for (let k = -127; k <= 127; k++) t[k + 127] = toHalf(k * scale);
    halfTables.set(scaleHalf, t);
  }
  return t;
}

/**
 * Writes a GGUF llama model with deterministic pseudo-random weights: the same preset, type and
 * seed always give the same bytes. Streams to disk (a temporary file renamed at the end).
 */
export async function makeModel(options: MakeModelOptions): Promise<MakeModelResult> {
  const preset = options.preset ?? 'tiny';
  const type = options.type ?? 'f16';
  const seed = (options.seed ?? 1) >>> 0;
  const shape = PRESETS[preset];
  const vocab = buildVocabulary(shape.nVocab);
  const plans = planTensors(shape, type, vocab.silent);

  const meta: [string, MetaValue][] = [
    ['general.architecture', { t: 'str', v: 'llama' }],
    ['general.name', { t: 'str', v: `vigil-${preset}-${type}-seed${seed}` }],
    ['general.alignment', { t: 'u32', v: GGUF_ALIGNMENT }],
    ['general.file_type', { t: 'u32', v: FILE_TYPES[type] }],
    ['llama.context_length', { t: 'u32', v: shape.contextLength }],
    ['llama.embedding_length', { t: 'u32', v: shape.nEmbd }],
    ['llama.block_count', { t: 'u32', v: shape.nLayer }],
    ['llama.feed_forward_length', { t: 'u32', v: shape.nFf }],
    ['llama.attention.head_count', { t: 'u32', v: shape.nHead }],
    ['llama.attention.head_count_kv', { t: 'u32', v: shape.nHeadKv }],
    ['llama.attention.layer_norm_rms_epsilon', { t: 'f32', v: 1e-5 }],
    ['llama.rope.dimension_count', { t: 'u32', v: shape.nEmbd / shape.nHead }],
    ['llama.rope.freq_base', { t: 'f32', v: 10000 }],
    ['llama.vocab_size', { t: 'u32', v: shape.nVocab }],
    ['tokenizer.ggml.model', { t: 'str', v: 'llama' }],
    ['tokenizer.ggml.tokens', { t: 'strs', v: vocab.tokens }],
    ['tokenizer.ggml.scores', { t: 'f32s', v: vocab.scores }],
    ['tokenizer.ggml.token_type', { t: 'i32s', v: vocab.types }],
    ['tokenizer.ggml.unknown_token_id', { t: 'u32', v: vocab.unk }],
    ['tokenizer.ggml.bos_token_id', { t: 'u32', v: vocab.bos }],
    ['tokenizer.ggml.eos_token_id', { t: 'u32', v: vocab.imEnd }],
    ['tokenizer.ggml.padding_token_id', { t: 'u32', v: vocab.eos }],
    ['tokenizer.ggml.add_bos_token', { t: 'bool', v: false }],
    ['tokenizer.ggml.add_eos_token', { t: 'bool', v: false }],
    ['tokenizer.chat_template', { t: 'str', v: CHATML_TEMPLATE }],
  ];

  const head = new ByteWriter();
  head.u32(GGUF_MAGIC);
  head.u32(GGUF_VERSION);
  head.u64(plans.length);
  head.u64(meta.length);
  for (const [k, v] of meta) writeMeta(head, k, v);
  for (const p of plans) {
    head.str(p.name);
    head.u32(p.dims.length);
    for (const d of p.dims) head.u64(d);
    head.u32(p.type);
    head.u64(p.offset);
  }
  head.pad(GGUF_ALIGNMENT);
  const last = plans[plans.length - 1]!;
  const total = head.length + last.offset + last.bytes;

  const tmp = `${options.out}.tmp-${process.pid}`;
  const fh = await open(tmp, 'w', 0o644);
  let written = 0;
  let reported = -1;
  const report = () => {
    const step = Math.floor((written / total) * 200);
    if (step !== reported) {
      reported = step;
      options.onProgress?.(written, total);
    }
  };
  try {
    const put = async (b: Buffer) => {
      let off = 0;
      while (off < b.length) {
        const { bytesWritten } = await fh.write(b, off, b.length - off);
        off += bytesWritten;
      }
      written += b.length;
      report();
    };
    await put(head.bytes());
    const chunk = Buffer.alloc(8 << 20);
    for (const p of plans) {
      const pos = head.length + p.offset;
      if (pos > written) await put(Buffer.alloc(pos - written));
      const rng = new Xorshift128(hash32(p.name, seed));
      const rowBytes = tensorBytes(p.type, p.dims[0]!);
      const rowsTotal = p.dims[1] ?? 1;
      const rowsPerChunk = Math.max(1, Math.floor(chunk.length / rowBytes));
      for (let r = 0; r < rowsTotal; r += rowsPerChunk) {
        const rows = Math.min(rowsPerChunk, rowsTotal - r);
        const n = fillRows(p, rng, r, rows, chunk);
        await put(chunk.subarray(0, n));
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  const { rename } = await import('node:fs/promises');
  await rename(tmp, options.out);
  return { path: options.out, bytes: total, parameters: parameterCount(shape), preset, type, seed };
}

// ---------------------------------------------------------------------------------------------
// Reader / validator

export class GgufError extends Error {
  readonly code = 'EGGUF';
  constructor(message: string) {
    super(message);
    this.name = 'GgufError';
  }
}

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
    private readonly fh: import('node:fs/promises').FileHandle,
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

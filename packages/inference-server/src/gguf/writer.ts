/**
 * A writer of GGUF llama models with deterministic pseudo-random weights (`make-model`): the same
 * preset, type and seed always give the same bytes. The server itself never writes models.
 */
import { PRIVATE_DIR, writeFileAtomicWith } from '@vigil/shared-types/node';
import { ByteWriter, type MetaValue, writeMeta } from './bytes.js';
import {
  align,
  fromHalf,
  GGUF_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  toHalf,
  type WeightType,
} from './format.js';
import {
  buildVocabulary,
  CHATML_TEMPLATE,
  type ModelShape,
  PRESETS,
  type PresetName,
  parameterCount,
} from './vocabulary.js';

/**
 * A model is not a secret: the file is 0644. A directory created for it is 0700 whatever the
 * umask: it is often vigil's own data directory (~/.local/share/vigil), which later holds the
 * message stores.
 */
export const MODEL_FILE_MODES = { mode: 0o644, dirMode: PRIVATE_DIR } as const;

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

// Tensors and metadata

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
  /**
   * Column `index` of every row is `value`; with `onlyRow`, that row's column is `value` and every
   * other row's is 0 (the end-of-answer construction of `endAnswers`).
   */
  readonly column?: { readonly index: number; readonly value: number; readonly onlyRow?: number };
}

function tensorBytes(type: number, elements: number): number {
  if (type === GgmlType.F32) return elements * 4;
  if (type === GgmlType.F16) return elements * 2;
  return (elements / 32) * 34;
}

export interface MakeModelOptions {
  readonly out: string;
  readonly preset?: PresetName;
  readonly seed?: number;
  readonly type?: WeightType;
  /**
   * A model that ends every answer at once: the end-of-turn token is its most likely next token at
   * every step (a model for protocol smoke tests of agent programs, whose turns must end).
   */
  readonly endAnswers?: boolean;
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
  readonly endAnswers: boolean;
}

const TYPE_IDS: Readonly<Record<WeightType, number>> = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0 };
/** general.file_type: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0. */
const FILE_TYPES: Readonly<Record<WeightType, number>> = { f32: 0, f16: 1, q8_0: 7 };

/**
 * How `endAnswers` makes the end-of-turn token win: residual dimension END_DIM holds a large
 * constant (every token embedding has it there, and no layer's output projection writes to it), so
 * after the final RMS norm that dimension is about sqrt(n_embd) and the others are small; the
 * output row of the end-of-turn token reads only that dimension, with a weight that puts its logit
 * far above every other token's, and the other rows do not read it.
 */
const END_DIM = 0;
const END_READ = 4;
const endEmbedding = (shape: ModelShape) => 16 * Math.sqrt(shape.nEmbd);

/** Plans the tensors of a llama model of the given shape. */
function planTensors(
  shape: ModelShape,
  type: WeightType,
  silent: ReadonlySet<number>,
  endToken: number | null,
): TensorPlan[] {
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
  const ends = endToken !== null;
  const held = ends ? { zeroRows: new Set([END_DIM]) } : {};
  matrix('token_embd.weight', shape.nEmbd, shape.nVocab, {
    limit: 1,
    ...(ends ? { column: { index: END_DIM, value: endEmbedding(shape) } } : {}),
  });
  for (let i = 0; i < shape.nLayer; i++) {
    norm(`blk.${i}.attn_norm.weight`);
    matrix(`blk.${i}.attn_q.weight`, shape.nEmbd, shape.nEmbd);
    matrix(`blk.${i}.attn_k.weight`, shape.nEmbd, kv);
    matrix(`blk.${i}.attn_v.weight`, shape.nEmbd, kv);
    matrix(`blk.${i}.attn_output.weight`, shape.nEmbd, shape.nEmbd, held);
    norm(`blk.${i}.ffn_norm.weight`);
    matrix(`blk.${i}.ffn_gate.weight`, shape.nEmbd, shape.nFf);
    matrix(`blk.${i}.ffn_up.weight`, shape.nEmbd, shape.nFf);
    matrix(`blk.${i}.ffn_down.weight`, shape.nFf, shape.nEmbd, held);
  }
  norm('output_norm.weight');
  // Special tokens and unprintable bytes get all-zero output rows: their logit is exactly 0 while
  // hundreds of others are random around 0, so the model (practically) never emits them and its
  // output is printable text that runs until max_tokens or a stop string.
  matrix('output.weight', shape.nEmbd, shape.nVocab, {
    zeroRows: silent,
    limit: Math.sqrt(3 / shape.nEmbd) * 4,
    ...(ends ? { column: { index: END_DIM, value: END_READ, onlyRow: endToken } } : {}),
  });
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
    if (p.column) {
      at = writeRowWithColumn(p, r, q, scale, out, at);
    } else if (p.type === GgmlType.F32) {
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

/** One row of `p` as k·scale with `p.column` applied, each value encoded as exactly as the type allows. */
function writeRowWithColumn(p: TensorPlan, r: number, q: Int8Array, scale: number, out: Buffer, at: number): number {
  const col = p.column!;
  const v = Float32Array.from(q, (k) => k * scale);
  if (col.onlyRow === undefined || col.onlyRow === r) v[col.index] = col.value;
  else v[col.index] = 0;
  if (p.type === GgmlType.F32) {
    for (const x of v) at = out.writeFloatLE(x, at);
  } else if (p.type === GgmlType.F16) {
    for (const x of v) at = out.writeUInt16LE(toHalf(x), at);
  } else {
    for (let c = 0; c < v.length; c += 32) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(v[c + j]!));
      const dHalf = toHalf(amax / 127);
      const d = fromHalf(dHalf);
      at = out.writeUInt16LE(dHalf, at);
      for (let j = 0; j < 32; j++)
        out[at++] = (d === 0 ? 0 : Math.max(-127, Math.min(127, Math.round(v[c + j]! / d)))) & 0xff;
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
 * seed always give the same bytes. Streams to disk atomically (temporary file, fsync, rename).
 */
export async function makeModel(options: MakeModelOptions): Promise<MakeModelResult> {
  const preset = options.preset ?? 'tiny';
  const type = options.type ?? 'f16';
  const seed = (options.seed ?? 1) >>> 0;
  const shape = PRESETS[preset];
  const vocab = buildVocabulary(shape.nVocab);
  const endAnswers = options.endAnswers === true;
  const plans = planTensors(shape, type, vocab.silent, endAnswers ? vocab.imEnd : null);

  const meta: [string, MetaValue][] = [
    ['general.architecture', { t: 'str', v: 'llama' }],
    ['general.name', { t: 'str', v: `vigil-${preset}-${type}-seed${seed}${endAnswers ? '-ends' : ''}` }],
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

  let written = 0;
  let reported = -1;
  const report = () => {
    const step = Math.floor((written / total) * 200);
    if (step !== reported) {
      reported = step;
      options.onProgress?.(written, total);
    }
  };
  await writeFileAtomicWith(
    options.out,
    async (fh) => {
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
    },
    MODEL_FILE_MODES,
  );
  return { path: options.out, bytes: total, parameters: parameterCount(shape), preset, type, seed, endAnswers };
}

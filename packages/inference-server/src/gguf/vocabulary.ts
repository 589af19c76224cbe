/** The shapes of the models `make-model` writes, and their byte-fallback SentencePiece vocabulary. */

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

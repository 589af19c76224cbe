/**
 * make-model: deterministic GGUF files that llama.cpp loads and generates with. Loading happens
 * only in child processes (a malformed model can abort the process that loads it).
 */
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  buildVocabulary,
  checkModelSummary,
  GgufError,
  makeModel,
  PRESETS,
  parameterCount,
  readGgufSummary,
} from '../src/index.js';
import { chat, cli, exited, makeTiny, request, serveTiny, sha256, spawnServer, tmpDir, withServer } from './helpers.js';

const tmp = tmpDir();
afterAll(() => tmp.cleanup());

describe('make-model', () => {
  it('gives the same bytes for the same seed and other bytes for another seed', async () => {
    const a = join(tmp.dir, 'a.gguf');
    const b = join(tmp.dir, 'b.gguf');
    const c = join(tmp.dir, 'c.gguf');
    const r = await cli(['make-model', '--out', a, '--seed', '7']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ path: a, preset: 'tiny', type: 'f16', seed: 7 });
    expect((await cli(['make-model', '--out', b, '--seed', '7'])).code).toBe(0);
    expect((await cli(['make-model', '--out', c, '--seed', '8'])).code).toBe(0);
    expect(sha256(a)).toBe(sha256(b));
    expect(sha256(a)).not.toBe(sha256(c));
    // tiny is well under a megabyte
    expect(statSync(a).size).toBeLessThan(512 * 1024);
  });

  it('refuses to replace a file without --force, and takes its flags from the environment', async () => {
    const f = join(tmp.dir, 'exists.gguf');
    writeFileSync(f, 'x');
    const r = await cli(['make-model', '--out', f]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('exists');
    const e = await cli(['make-model'], {
      INFERENCE_SERVER_MAKE_MODEL_OUT: f,
      INFERENCE_SERVER_MAKE_MODEL_FORCE: '1',
      INFERENCE_SERVER_MAKE_MODEL_TYPE: 'q8_0',
    });
    expect(e.code).toBe(0);
    expect(JSON.parse(e.stdout)).toMatchObject({ type: 'q8_0' });
  });

  it('writes a well-formed GGUF v3 llama model with a byte-fallback vocabulary and a ChatML template', async () => {
    const f = join(tmp.dir, 'inspect.gguf');
    const made = await makeModel({ out: f, seed: 3 });
    expect(made.parameters).toBe(parameterCount(PRESETS.tiny));
    const s = await readGgufSummary(f);
    checkModelSummary(s);
    expect(s.version).toBe(3);
    expect(s.fileSize).toBe(made.bytes);
    expect(s.metadata['general.architecture']).toBe('llama');
    expect(s.metadata['tokenizer.ggml.model']).toBe('llama');
    expect(s.metadata['tokenizer.chat_template']).toContain('<|im_start|>');
    const tokens = s.metadata['tokenizer.ggml.tokens'] as string[];
    expect(tokens).toHaveLength(PRESETS.tiny.nVocab);
    expect(tokens.slice(0, 5)).toEqual(['<unk>', '<s>', '</s>', '<|im_start|>', '<|im_end|>']);
    expect(tokens).toContain('<0x00>');
    expect(tokens).toContain('<0xFF>');
    const names = s.tensors.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['token_embd.weight', 'output.weight', 'blk.1.ffn_down.weight']));
    const embd = s.tensors.find((t) => t.name === 'token_embd.weight')!;
    expect(embd.dims).toEqual([PRESETS.tiny.nEmbd, PRESETS.tiny.nVocab]);
    // every tensor starts on the alignment
    for (const t of s.tensors) expect((s.dataOffset + t.offset) % 32).toBe(0);
  });

  it('writes f32, f16 and q8_0 of the expected sizes', async () => {
    const sizes: Record<string, number> = {};
    for (const type of ['f32', 'f16', 'q8_0'] as const) {
      const f = join(tmp.dir, `size-${type}.gguf`);
      sizes[type] = (await makeModel({ out: f, type })).bytes;
      expect(statSync(f).size).toBe(sizes[type]);
    }
    expect(sizes.f32!).toBeGreaterThan(sizes.f16!);
    expect(sizes.f16!).toBeGreaterThan(sizes.q8_0!);
  });

  it('builds a vocabulary whose words are reachable by pairwise merges', () => {
    const v = buildVocabulary(2000);
    expect(v.tokens).toHaveLength(2000);
    const set = new Set(v.tokens);
    for (const t of v.tokens.filter((x) => x.startsWith('▁') && x.length > 2)) {
      expect(set.has(t.slice(0, -1))).toBe(true);
    }
    expect(v.silent.has(v.imEnd)).toBe(true);
  });

  it('refuses truncated and non-GGUF files in JavaScript, before llama.cpp sees them', async () => {
    const f = join(tmp.dir, 'trunc-src.gguf');
    await makeModel({ out: f });
    const bytes = readFileSync(f);
    const truncated = join(tmp.dir, 'truncated.gguf');
    writeFileSync(truncated, bytes.subarray(0, bytes.length - 1000));
    await expect(readGgufSummary(truncated)).rejects.toThrow(/beyond the end of the file/);
    const garbage = join(tmp.dir, 'garbage.gguf');
    writeFileSync(garbage, Buffer.alloc(4096, 7));
    await expect(readGgufSummary(garbage)).rejects.toThrow(GgufError);
  });
});

describe('generated models in llama.cpp (child processes)', () => {
  let models: Record<string, string>;
  beforeAll(async () => {
    models = {};
    for (const type of ['f32', 'q8_0']) {
      models[type] = join(tmp.dir, `tiny-${type}.gguf`);
      await makeTiny(models[type]!, ['--type', type]);
    }
  });

  for (const type of ['f32', 'q8_0']) {
    it(`loads the ${type} model and generates text`, async () => {
      await withServer(serveTiny(models[type]!), async (s) => {
        const r = await request(s.http!, { body: chat('hello', { max_tokens: 12, temperature: 0 }) });
        expect(r.status).toBe(200);
        const body = r.json();
        expect(body.choices[0].message.content.length).toBeGreaterThan(0);
        expect(body.usage.completion_tokens).toBe(12);
      });
    });
  }

  it('exits 1 with "model load failed" for a file llama.cpp refuses (a missing tensor), without serving', async () => {
    // Valid GGUF, passes the JavaScript checks, but a tensor llama.cpp needs is renamed.
    const src = join(tmp.dir, 'tiny-q8_0.gguf');
    const bytes = Buffer.from(readFileSync(src));
    const at = bytes.indexOf('blk.0.attn_q.weight');
    bytes.write('blk.0.attn_X', at, 'latin1');
    const broken = join(tmp.dir, 'broken.gguf');
    writeFileSync(broken, bytes);
    const s = await spawnServer(['--model', broken, '--http', '127.0.0.1:0']);
    const line = await s.waitForLog('model load failed');
    expect(line).toContain('blk.0.attn_q.weight');
    expect(await exited(s.child)).toEqual({ code: 1, signal: null });
    const stderr = s
      .output()
      .split('\n')
      .filter((l) => l.startsWith('inference-server: '));
    expect(stderr).toHaveLength(1);
  });

  it('exits 1 with "model load failed" for a file that is not GGUF, before listening', async () => {
    const garbage = join(tmp.dir, 'not-a-model.gguf');
    writeFileSync(garbage, Buffer.alloc(100_000, 1));
    const r = await cli(['serve', '--model', garbage, '--http', '127.0.0.1:0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^inference-server: model load failed: .*not a GGUF file/);
    expect(r.stdout).not.toContain('"listening"');
    expect(r.stdout).toContain('model load failed');
  });
});

/** The input limits (limits.ts) and the grammar cache's bound in bytes, without a model. */
import { describe, expect, it } from '@jest/globals';
import { checkSchemaShape, checkStop, checkTools, DEFAULT_INPUT_LIMITS, expandedBranches } from '../src/limits.js';
import { GrammarCache, toGrammarSchema } from '../src/schema.js';

const refusal = (f: () => void) => {
  try {
    f();
  } catch (err) {
    return err as { status: number; param: string; code: string; message: string };
  }
  throw new Error('accepted');
};

function chain(depth: number, width = 2): Record<string, unknown> {
  const defs: Record<string, unknown> = { d0: { type: 'string' } };
  for (let i = 1; i <= depth; i++) {
    defs[`d${i}`] = { anyOf: Array.from({ length: width }, () => ({ $ref: `#/$defs/d${i - 1}` })) };
  }
  return { $defs: defs, type: 'object', properties: { a: { $ref: `#/$defs/d${depth}` } } };
}

describe('input limits', () => {
  it('counts anyOf alternatives after $ref expansion, in linear time, saturating', () => {
    // d_i = 2 + 2 d_(i-1): 2, 6, 14, … = 2^(i+1) - 2.
    expect(expandedBranches(toGrammarSchema(chain(3), 'p'), 1e9)).toBe(14);
    expect(expandedBranches(toGrammarSchema(chain(8), 'p'), 1e9)).toBe(510);
    const t = Date.now();
    const deep = toGrammarSchema(chain(40), 'p', { ...DEFAULT_INPUT_LIMITS, maxSchemaBranches: 1e15 });
    expect(expandedBranches(deep, 1001)).toBe(1001);
    expect(Date.now() - t).toBeLessThan(5000);
    // A reference used once per alternative counts once per use.
    const e = refusal(() => toGrammarSchema(chain(9), 'response_format.json_schema.schema'));
    expect(e).toMatchObject({
      status: 400,
      openaiCode: 'schema_too_complex',
      param: 'response_format.json_schema.schema',
    });
    expect(e.message).toContain('1000 anyOf/oneOf alternatives');
  });

  it('refuses depth, enum values and bytes beyond the limits, without recursion', () => {
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 100_000; i++) deep = { type: 'array', items: deep };
    expect(refusal(() => toGrammarSchema(deep, 'p'))).toMatchObject({ status: 400, openaiCode: 'schema_too_complex' });
    expect(refusal(() => checkSchemaShape(deep, 'p'))).toMatchObject({ message: expect.stringContaining('64 levels') });
    const enums = {
      type: 'object',
      properties: { a: { enum: Array(600).fill('x') }, b: { enum: Array(401).fill('y') } },
    };
    expect(refusal(() => checkSchemaShape(enums, 'p')).message).toContain('1000 enum values');
    const big = { type: 'string', description: 'x'.repeat(70_000) };
    expect(refusal(() => checkSchemaShape(big, 'p')).message).toContain('at most 65536');
    expect(() =>
      checkSchemaShape({ type: 'object', properties: { a: { enum: Array(1000).fill('x') } } }, 'p'),
    ).not.toThrow();
  });

  it('bounds each stop string and all together, in bytes', () => {
    expect(() => checkStop(['x'.repeat(1024), 'y'.repeat(1024)])).not.toThrow();
    expect(refusal(() => checkStop(['x'.repeat(1025)]))).toMatchObject({
      param: 'stop',
      openaiCode: 'string_above_max_length',
    });
    // 342 three-byte characters: 1,026 bytes.
    expect(refusal(() => checkStop(['€'.repeat(342)])).message).toContain('1026 bytes');
    expect(refusal(() => checkStop(['a'.repeat(1000), 'b'.repeat(1000), 'c'.repeat(100)])).message).toContain(
      'together',
    );
  });

  it('bounds the tools array in count and bytes', () => {
    const tool = (i: number, extra = '') => ({ type: 'function', function: { name: `f${i}`, description: extra } });
    expect(() => checkTools(Array.from({ length: 128 }, (_, i) => tool(i)))).not.toThrow();
    expect(refusal(() => checkTools(Array.from({ length: 129 }, (_, i) => tool(i))))).toMatchObject({
      param: 'tools',
      openaiCode: 'array_above_max_length',
    });
    expect(refusal(() => checkTools([tool(0, 'x'.repeat(300_000))])).message).toContain('bytes of JSON');
  });
});

describe('the grammar cache', () => {
  it('keeps at most maxBytes of schema text and grammar, dropping the least recently used', async () => {
    const cache = new GrammarCache(
      async (s) => ({ text: 'g'.repeat(Number(s.size)) }),
      64,
      10_000,
      (g) => g.text.length,
    );
    for (let i = 0; i < 20; i++) await cache.get({ size: 1000, i });
    expect(cache.bytes).toBeLessThanOrEqual(10_000);
    expect(cache.size).toBeLessThan(10);
    // The most recent ones are kept.
    const misses = cache.misses;
    await cache.get({ size: 1000, i: 19 });
    expect(cache.misses).toBe(misses);
    // One larger than the whole bound is answered and not kept.
    const huge = await cache.get({ size: 50_000, i: -1 });
    expect(huge.text).toHaveLength(50_000);
    expect(cache.bytes).toBeLessThanOrEqual(10_000);
  });
});

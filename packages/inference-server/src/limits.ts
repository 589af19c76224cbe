/**
 * Limits on what one request may make the server build, each checked before the work and each a
 * 400 naming the field: stop strings (each and together, in bytes), JSON schemas (bytes, nesting
 * depth, `enum` values, `anyOf`/`oneOf` alternatives once every `$ref` is expanded) and the tools
 * array (count, bytes). Without them one request of a few kilobytes could make the grammar take
 * hours or gigabytes. Every check is iterative (a schema nested 100,000 deep is a 400, not a stack
 * overflow) and pure, so any route can run them on its own request.
 */
import { ApiError } from './errors.js';

export interface InputLimits {
  /** Bytes (UTF-8) of one stop string. */
  readonly maxStopBytes: number;
  /** Bytes of all stop strings of a request together. */
  readonly maxStopTotalBytes: number;
  /** Bytes of one schema as JSON text (`response_format`'s, or one tool's parameters). */
  readonly maxSchemaBytes: number;
  /** Nesting of JSON objects and arrays in one schema. */
  readonly maxSchemaDepth: number;
  /** `enum` values in one schema, all its enums together. */
  readonly maxEnumValues: number;
  /** `anyOf`/`oneOf` alternatives in one schema after every `$ref` is expanded. */
  readonly maxSchemaBranches: number;
  /** Functions in `tools`. */
  readonly maxTools: number;
  /** Bytes of the whole `tools` array as JSON text. */
  readonly maxToolsBytes: number;
}

export const DEFAULT_INPUT_LIMITS: InputLimits = {
  maxStopBytes: 1024,
  maxStopTotalBytes: 2048,
  maxSchemaBytes: 64 * 1024,
  maxSchemaDepth: 64,
  maxEnumValues: 1000,
  maxSchemaBranches: 1000,
  maxTools: 128,
  maxToolsBytes: 256 * 1024,
};

const tooLarge = (param: string, message: string, code = 'invalid_value') =>
  new ApiError(400, `Invalid '${param}': ${message}`, 'invalid_request_error', param, code);

/** The schema is beyond what this server builds grammars for (400 `schema_too_complex`). */
export const schemaTooComplex = (param: string, why: string) =>
  tooLarge(param, `schema too complex: ${why}.`, 'schema_too_complex');

/** Stop strings within their limits; throws ApiError 400 naming `param` (`stop`, or `stop_sequences`). */
export function checkStop(stop: readonly string[], limits: InputLimits = DEFAULT_INPUT_LIMITS, param = 'stop'): void {
  let total = 0;
  for (const [i, s] of stop.entries()) {
    const bytes = Buffer.byteLength(s);
    if (bytes > limits.maxStopBytes) {
      throw tooLarge(
        param,
        `stop string ${i} is ${bytes} bytes; at most ${limits.maxStopBytes} bytes each.`,
        'string_above_max_length',
      );
    }
    total += bytes;
  }
  if (total > limits.maxStopTotalBytes) {
    throw tooLarge(
      param,
      `the stop strings are ${total} bytes together; at most ${limits.maxStopTotalBytes}.`,
      'string_above_max_length',
    );
  }
}

/**
 * The raw schema's nesting, `enum` values and size, walked without recursion (depth first; it
 * stops at the first limit passed). Throws ApiError 400 `schema_too_complex` naming `param`.
 */
export function checkSchemaShape(schema: unknown, param: string, limits: InputLimits = DEFAULT_INPUT_LIMITS): void {
  const stack: [unknown, number][] = [[schema, 1]];
  let enums = 0;
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth > limits.maxSchemaDepth)
      throw schemaTooComplex(param, `nested deeper than ${limits.maxSchemaDepth} levels`);
    if (!Array.isArray(node)) {
      const e = (node as Record<string, unknown>).enum;
      if (Array.isArray(e)) {
        enums += e.length;
        if (enums > limits.maxEnumValues) {
          throw schemaTooComplex(param, `more than ${limits.maxEnumValues} enum values`);
        }
      }
    }
    for (const v of Object.values(node)) if (v !== null && typeof v === 'object') stack.push([v, depth + 1]);
  }
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > limits.maxSchemaBytes) {
    throw schemaTooComplex(param, `${bytes} bytes of JSON; at most ${limits.maxSchemaBytes}`);
  }
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * `oneOf` alternatives of a grammar schema (schema.ts's form: `oneOf`, `$defs`, `$ref` to
 * `#/$defs/NAME`) once every `$ref` is expanded, counted per definition once (memoized) and
 * saturating at `cap`: a chain of 40 definitions that each refer twice to the next counts 2^40
 * in 40 steps. A `$ref` loop counts nothing here (node-llama-cpp refuses loops itself).
 */
export function expandedBranches(schema: Json, cap: number): number {
  const defs = isObject(schema.$defs) ? schema.$defs : {};
  const memo = new Map<string, number>();
  const visiting = new Set<string>();
  const add = (a: number, b: number) => Math.min(cap, a + b);
  const count = (node: unknown, depth: number): number => {
    if (Array.isArray(node)) return node.reduce<number>((n, v) => add(n, count(v, depth + 1)), 0);
    if (!isObject(node)) return 0;
    let n = 0;
    for (const [k, v] of Object.entries(node)) {
      if (k === '$defs' && depth === 0) continue;
      if (k === '$ref' && typeof v === 'string') n = add(n, countRef(v.slice('#/$defs/'.length)));
      else if (k === 'oneOf' && Array.isArray(v)) n = add(n, add(v.length, count(v, depth + 1)));
      else if (v !== null && typeof v === 'object') n = add(n, count(v, depth + 1));
    }
    return n;
  };
  const countRef = (name: string): number => {
    const known = memo.get(name);
    if (known !== undefined) return known;
    if (visiting.has(name) || !Object.hasOwn(defs, name)) return 0;
    visiting.add(name);
    const n = count(defs[name], 1);
    visiting.delete(name);
    memo.set(name, n);
    return n;
  };
  return count(schema, 0);
}

/** The grammar schema's alternatives after `$ref` expansion within the limit; else 400. */
export function checkSchemaBranches(schema: Json, param: string, limits: InputLimits = DEFAULT_INPUT_LIMITS): void {
  const cap = limits.maxSchemaBranches + 1;
  if (expandedBranches(schema, cap) >= cap) {
    throw schemaTooComplex(
      param,
      `more than ${limits.maxSchemaBranches} anyOf/oneOf alternatives once every $ref is expanded`,
    );
  }
}

/** The `tools` array within its count and size; throws ApiError 400 naming `tools`. */
export function checkTools(tools: readonly unknown[], limits: InputLimits = DEFAULT_INPUT_LIMITS): void {
  if (tools.length > limits.maxTools) {
    throw tooLarge(
      'tools',
      `array too long: at most ${limits.maxTools} tools, got ${tools.length}.`,
      'array_above_max_length',
    );
  }
  if (tools.length === 0) return;
  const bytes = Buffer.byteLength(JSON.stringify(tools));
  if (bytes > limits.maxToolsBytes) {
    throw tooLarge('tools', `${bytes} bytes of JSON; at most ${limits.maxToolsBytes}.`, 'array_above_max_length');
  }
}

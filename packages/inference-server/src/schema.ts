/**
 * JSON schemas from requests (`response_format.json_schema.schema`, `tools[].function.parameters`)
 * checked against what node-llama-cpp's JSON-schema grammars enforce, before use: a keyword the
 * grammar would ignore (`pattern`, `minimum`, `allOf`, …) would let the model write JSON that does
 * not validate, so it is a 400 naming the keyword and where it is, never a silent free-text
 * answer. Also a bounded cache of compiled grammars, one per distinct schema. Pure but for the
 * cache's compile callback.
 */

import { invalid } from './errors.js';
import { checkSchemaBranches, checkSchemaShape, DEFAULT_INPUT_LIMITS, type InputLimits } from './limits.js';

/** Keywords the grammar enforces (or that only annotate), per JSON Schema. */
export const ANNOTATIONS: ReadonlySet<string> = new Set([
  'description',
  'title',
  'default',
  'examples',
  '$schema',
  '$id',
  '$comment',
  'deprecated',
  'readOnly',
  'writeOnly',
]);
export const ENFORCED: ReadonlySet<string> = new Set([
  'type',
  'const',
  'enum',
  'oneOf',
  'anyOf',
  'properties',
  'required',
  'additionalProperties',
  'minProperties',
  'maxProperties',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'format',
  '$defs',
  'definitions',
  '$ref',
]);
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null', 'object', 'array']);
export const FORMATS: ReadonlySet<string> = new Set(['date-time', 'time', 'date']);

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The schema as node-llama-cpp's GbnfJsonSchema takes it (`anyOf` as `oneOf`, `definitions` as
 * `$defs`, annotations but `description` dropped). Throws ApiError 400 (`param`, the keyword and
 * its JSON pointer) for anything the grammar would not enforce, and 400 `schema_too_complex` for a
 * schema beyond `limits` (checked before it is walked, and its alternatives after).
 */
export function toGrammarSchema(schema: unknown, param: string, limits: InputLimits = DEFAULT_INPUT_LIMITS): Json {
  checkSchemaShape(schema, param, limits);
  const fail = (path: string, what: string) =>
    invalid(
      `Invalid '${param}': ${what} (at ${path || '#'}); it is not supported by this server.`,
      param,
      'unsupported_value',
    );
  const defs = new Set<string>();
  if (isObject(schema)) {
    for (const k of ['$defs', 'definitions']) {
      const d = schema[k];
      if (isObject(d)) for (const name of Object.keys(d)) defs.add(name);
    }
  }
  const walk = (node: unknown, path: string): Json => {
    if (node === true || (isObject(node) && Object.keys(node).every((k) => ANNOTATIONS.has(k)))) {
      throw fail(path, 'a schema that allows any value (give it a "type")');
    }
    if (!isObject(node)) throw fail(path, 'a schema must be an object');
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) {
      if (ANNOTATIONS.has(k)) {
        if (k === 'description' && typeof v === 'string') out.description = v;
        continue;
      }
      if (!ENFORCED.has(k)) throw fail(path, `the keyword '${k}'`);
      switch (k) {
        case 'type': {
          const types = Array.isArray(v) ? v : [v];
          for (const t of types)
            if (typeof t !== 'string' || !TYPES.has(t)) throw fail(path, `the type ${JSON.stringify(t)}`);
          if (Array.isArray(v) && types.some((t) => t === 'object' || t === 'array')) {
            throw fail(path, 'a list of types that includes "object" or "array" (use anyOf)');
          }
          out.type = v;
          break;
        }
        case 'format':
          if (typeof v !== 'string' || !FORMATS.has(v)) throw fail(path, `the format ${JSON.stringify(v)}`);
          out.format = v;
          break;
        case 'oneOf':
        case 'anyOf':
          if (!Array.isArray(v) || v.length === 0) throw fail(path, `'${k}' must be a non-empty array`);
          out.oneOf = v.map((s, i) => walk(s, `${path}/${k}/${i}`));
          break;
        case 'properties':
          if (!isObject(v)) throw fail(path, "'properties' must be an object");
          out.properties = Object.fromEntries(
            Object.entries(v).map(([name, s]) => [name, walk(s, `${path}/properties/${name}`)]),
          );
          break;
        case 'additionalProperties':
          out.additionalProperties = typeof v === 'boolean' ? v : walk(v, `${path}/additionalProperties`);
          break;
        case 'items':
          if (typeof v === 'boolean') {
            if (v) throw fail(`${path}/items`, 'a schema that allows any value (give it a "type")');
            out.maxItems = 0;
          } else out.items = walk(v, `${path}/items`);
          break;
        case 'prefixItems':
          if (!Array.isArray(v)) throw fail(path, "'prefixItems' must be an array");
          out.prefixItems = v.map((s, i) => walk(s, `${path}/prefixItems/${i}`));
          break;
        case '$defs':
        case 'definitions':
          if (path !== '') throw fail(path, `'${k}' below the root`);
          if (!isObject(v)) throw fail(path, `'${k}' must be an object`);
          out.$defs = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, walk(s, `/${k}/${name}`)]));
          break;
        case '$ref': {
          const m = typeof v === 'string' ? /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(v) : null;
          if (!m || !defs.has(m[1]!))
            throw fail(path, `the reference ${JSON.stringify(v)} (only #/$defs/NAME of the root)`);
          out.$ref = `#/$defs/${m[1]}`;
          break;
        }
        default:
          out[k] = v;
      }
    }
    if (out.type === undefined && out.const === undefined && out.enum === undefined && !out.oneOf && !out.$ref) {
      if (out.properties || out.additionalProperties !== undefined) out.type = 'object';
      else if (out.items || out.prefixItems) out.type = 'array';
      else throw fail(path, 'a schema without "type", "const", "enum", "anyOf" or "$ref"');
    }
    return out;
  };
  const out = walk(schema, '');
  checkSchemaBranches(out, param, limits);
  return out;
}

/**
 * A least-recently-used cache of compiled grammars, one per distinct schema text, bounded in
 * entries and in bytes (the schema text plus what `sizeOf` says of the grammar; a grammar larger
 * than the whole bound is used once and not kept). A failed compile is not kept.
 */
export class GrammarCache<G> {
  private readonly entries = new Map<string, { made: Promise<G>; bytes: number }>();
  private total = 0;
  hits = 0;
  misses = 0;

  constructor(
    private readonly compile: (schema: Json, param: string) => Promise<G>,
    readonly capacity = 64,
    readonly maxBytes = Number.POSITIVE_INFINITY,
    private readonly sizeOf: (grammar: G) => number = () => 0,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Bytes held now (keys, and grammars once compiled). */
  get bytes(): number {
    return this.total;
  }

  get(schema: Json, param = 'schema'): Promise<G> {
    const key = JSON.stringify(schema);
    const found = this.entries.get(key);
    if (found) {
      this.hits++;
      this.entries.delete(key);
      this.entries.set(key, found);
      return found.made;
    }
    this.misses++;
    const made = this.compile(schema, param);
    const entry = { made, bytes: key.length };
    this.entries.set(key, entry);
    this.total += entry.bytes;
    made.then(
      (g) => {
        if (this.entries.get(key) !== entry) return;
        const more = this.sizeOf(g);
        entry.bytes += more;
        this.total += more;
        this.evict();
      },
      // A schema that fails to compile is not kept: the next request gets the error again.
      () => this.drop(key, entry),
    );
    this.evict();
    return made;
  }

  private drop(key: string, entry: { bytes: number }): void {
    if (this.entries.get(key) !== entry) return;
    this.entries.delete(key);
    this.total -= entry.bytes;
  }

  private evict(): void {
    while (this.entries.size > this.capacity || (this.total > this.maxBytes && this.entries.size > 0)) {
      const [key, entry] = this.entries.entries().next().value!;
      this.drop(key, entry);
    }
  }
}

import { isPhoneNumber } from '@vigil/shared-types';
import { invalidParams } from './errors.js';
import { METHOD_PARAMS, type MethodParams, type ParamSpec } from './methods-params.js';

/** Reading a method's params with signal-cli's names; every problem is a -32602 naming the param. */

export type Params = Record<string, unknown>;

/** A value as it may appear in an error message: short, and never a failure itself (deep nesting). */
function show(v: unknown): string {
  if (v !== null && typeof v === 'object') return Array.isArray(v) ? 'an array' : 'an object';
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 64 ? `${text.slice(0, 61)}...` : text;
}

export function asParams(params: unknown): Params {
  if (params === undefined || params === null) return {};
  if (typeof params !== 'object' || Array.isArray(params)) {
    throw invalidParams('params must be an object');
  }
  return params as Params;
}

/** `groupId` → `group-id`: the name signal-cli's command line (and its JSON-RPC layer) knows it by. */
export function dashed(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** The names a parameter is found under, in signal-cli's order: dashed, camelCase, then plural. */
export function spellings(name: string, spec: ParamSpec): string[] {
  const names = [name, ...(spec.aliases ?? [])].flatMap((n) => [dashed(n), n]);
  const all = spec.list ? [...names, ...names.map((n) => `${n}s`)] : names;
  return [...new Set(all)];
}

/** One accepted spelling of a documented parameter: whose it is, and its place in signal-cli's order. */
interface Spelling {
  readonly name: string;
  readonly spec: ParamSpec;
  /** The parameter's place in the method's table (problems are reported in that order). */
  readonly index: number;
  /** Its place among the parameter's spellings (the first one found is the one named). */
  readonly rank: number;
}

/** Each method table's spellings, worked out once: spelling → parameter. */
const compiled = new WeakMap<MethodParams, ReadonlyMap<string, Spelling>>();

function spellingsOf(specs: MethodParams): ReadonlyMap<string, Spelling> {
  let map = compiled.get(specs);
  if (!map) {
    const built = new Map<string, Spelling>();
    Object.entries(specs).forEach(([name, spec], index) => {
      spellings(name, spec).forEach((n, rank) => {
        if (!built.has(n)) built.set(n, { name, spec, index, rank });
      });
    });
    map = built;
    compiled.set(specs, map);
  }
  return map;
}

/**
 * The one parameter resolver of the embedded network, as signal-cli's JSON-RPC layer resolves
 * params: each documented parameter of the method (methods-params.ts) is taken from its camelCase
 * or dashed name, a list from its singular or plural name and as one value or an array; its type
 * is checked; it is put under its camelCase key (a list always as an array). Keys the method does
 * not document are ignored, as signal-cli ignores them. Every problem is a -32602 naming the
 * parameter as the client spelled it: a wrong type, one parameter under two spellings with
 * different values (signal-cli would silently take one), a parameter the embedded network does
 * not honour. A method without a table entry gets its params as they came.
 */
export function resolveParams(method: string, params: unknown, table = METHOD_PARAMS): Params {
  const given = asParams(params);
  const specs: MethodParams | undefined = table[method];
  if (!specs) return given;
  const known = spellingsOf(specs);
  // The keys given (usually a few), grouped by the parameter they spell.
  const found = new Map<string, { spelling: Spelling; keys: { key: string; rank: number }[] }>();
  for (const key of Object.keys(given)) {
    const spelling = known.get(key);
    if (!spelling || given[key] === null || given[key] === undefined) continue;
    const entry = found.get(spelling.name);
    if (entry) entry.keys.push({ key, rank: spelling.rank });
    else found.set(spelling.name, { spelling, keys: [{ key, rank: spelling.rank }] });
  }
  const out: Params = {};
  const entries = [...found.values()].sort((a, b) => a.spelling.index - b.spelling.index);
  for (const { spelling, keys } of entries) {
    const { name, spec } = spelling;
    const names = keys.sort((a, b) => a.rank - b.rank).map((k) => k.key);
    const key = names[0]!;
    for (const n of names) {
      if (tooDeep(given[n])) throw invalidParams(`${n} is nested deeper than ${MAX_DEPTH} levels`);
    }
    const value = given[key];
    if (names.length > 1) {
      const other = names.find((n) => JSON.stringify(given[n]) !== JSON.stringify(value));
      if (other !== undefined) throw invalidParams(`${key} and ${other} are the same parameter: give one of them`);
    }
    const resolved = spec.list ? (Array.isArray(value) ? value : [value]) : value;
    // A refusal first: whatever its value, the parameter is not taken.
    if (spec.refused && isSet(resolved)) throw invalidParams(`${key} is not supported: ${spec.refused}`);
    if (spec.list) for (const v of resolved as unknown[]) check(key, spec, v, true);
    else check(key, spec, resolved, false);
    out[name] = resolved;
  }
  return out;
}

/** No documented parameter nests deeper than this; a deeper value is refused before it is compared or shown. */
export const MAX_DEPTH = 8;

/** Whether `v` nests arrays or objects more than MAX_DEPTH levels (iterative: never overflows the stack). */
function tooDeep(v: unknown): boolean {
  let level: unknown[] = [v];
  for (let depth = 0; level.length > 0; depth++) {
    const next: unknown[] = [];
    for (const x of level) {
      if (x === null || typeof x !== 'object') continue;
      if (depth >= MAX_DEPTH) return true;
      for (const y of Array.isArray(x) ? x : Object.values(x)) next.push(y);
    }
    level = next;
  }
  return false;
}

function check(key: string, spec: ParamSpec, v: unknown, inList: boolean): void {
  const what = inList ? `${key} must be one or a list of` : `${key} must be`;
  switch (spec.type) {
    case 'string':
      if (typeof v !== 'string' || v === '')
        throw invalidParams(`${what} ${inList ? 'non-empty strings' : 'a non-empty string'}, got ${brief(v)}`);
      return;
    case 'text':
      if (typeof v !== 'string') throw invalidParams(`${what} ${inList ? 'strings' : 'a string'}, got ${brief(v)}`);
      return;
    case 'boolean':
      if (typeof v !== 'boolean') throw invalidParams(`${what} true or false, got ${brief(v)}`);
      return;
    case 'integer':
      if (typeof v !== 'number' || !Number.isSafeInteger(v))
        throw invalidParams(`${what} ${inList ? 'integers' : 'an integer'}, got ${brief(v)}`);
      return;
    case 'number':
      if (typeof v !== 'number' || !Number.isFinite(v))
        throw invalidParams(`${what} ${inList ? 'numbers' : 'a number'}, got ${brief(v)}`);
      return;
    case 'timestamp':
      if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) {
        throw invalidParams(
          `${what} message ${inList ? 'timestamps' : 'timestamp'} (positive integers), got ${brief(v)}`,
        );
      }
  }
}

function isSet(v: unknown): boolean {
  return Array.isArray(v) ? v.length > 0 : v !== false;
}

function brief(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** A value that signal-cli accepts as one value or an array: always an array. */
export function list(p: Params, name: string): unknown[] {
  const v = p[name];
  if (v === undefined || v === null) return [];
  return Array.isArray(v) ? v : [v];
}

export function numbers(p: Params, name: string): string[] {
  return list(p, name).map((v) => {
    if (typeof v !== 'string' || !isPhoneNumber(v)) {
      throw invalidParams(`${name} must be phone numbers in E.164 form, got ${show(v)}`);
    }
    return v;
  });
}

export function strings(p: Params, name: string): string[] {
  return list(p, name).map((v) => {
    if (typeof v !== 'string' || v === '') throw invalidParams(`${name} must be non-empty strings`);
    return v;
  });
}

export function optString(p: Params, name: string): string | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalidParams(`${name} must be a string`);
  return v;
}

export function reqString(p: Params, name: string): string {
  const v = optString(p, name);
  if (v === undefined || v === '') throw invalidParams(`${name} is required`);
  return v;
}

export function optBool(p: Params, name: string): boolean {
  const v = p[name];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalidParams(`${name} must be true or false`);
  return v;
}

export function timestamps(p: Params, name: string): number[] {
  return list(p, name).map((v) => {
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) {
      throw invalidParams(`${name} must be message timestamps (positive integers)`);
    }
    return v;
  });
}

export function optInt(p: Params, name: string): number | undefined {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalidParams(`${name} must be an integer`);
  return v;
}

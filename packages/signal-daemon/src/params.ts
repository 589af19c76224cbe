import { isPhoneNumber } from '@vigil/shared-types';
import { invalidParams } from './errors.js';

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

/**
 * Reads a call's params by the method's declared parameters (declared.ts): each is found under
 * any of its spellings and handed to the method under one key (a list always as an array under
 * its plural); a documented parameter the local network does not offer is -32602 naming it;
 * undocumented keys are dropped. Idempotent, so it is harmless after the daemon's own resolver.
 */
import { invalidParams } from '../errors.js';
import type { Params } from '../params.js';
import { DECLARED, dashed, spellings } from './declared.js';

const given = (v: unknown) => v !== undefined && v !== null && v !== false && !(Array.isArray(v) && v.length === 0);

export function resolveLocal(method: string, p: Params): Params {
  const declared = DECLARED[method];
  if (!declared) return p;
  for (const name of declared.refused) {
    if (given(p[name]) || given(p[dashed(name)])) {
      throw invalidParams(`${name} is not supported by the local network`);
    }
  }
  const out: Params = {};
  for (const param of declared.honoured) {
    const names = spellings(param).filter((n) => p[n] !== undefined && p[n] !== null);
    if (names.length === 0) continue;
    if (param.list) {
      out[param.key] = names.flatMap((n) => (Array.isArray(p[n]) ? (p[n] as unknown[]) : [p[n]]));
    } else {
      out[param.key] = p[names[0]!];
    }
  }
  return out;
}

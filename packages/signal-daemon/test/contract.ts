/**
 * Contract tests of the local network's methods: every call is made in both of signal-cli's
 * spellings. `camel` sends each parameter under its camelCase, singular name (`textStyle`,
 * `groupId`); `dashed` under its dashed name, plural for a list (`text-styles`, `group-ids`).
 */
import { METHOD_PARAMS } from '../src/methods-params.js';
import { dashed } from '../src/params.js';

export type Spelling = 'camel' | 'dashed';
export const SPELLINGS: readonly Spelling[] = ['camel', 'dashed'];

/** `params` written with signal-cli's camelCase singular names, in the given spelling. */
export function spell(method: string, params: Record<string, unknown>, how: Spelling): Record<string, unknown> {
  if (how === 'camel') return params;
  const declared = METHOD_PARAMS[method];
  if (!declared) throw new Error(`no declared params for ${method}`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(params)) {
    const spec = declared[k] ?? Object.values(declared).find((p) => p.aliases?.includes(k));
    out[dashed(spec?.list ? `${k}s` : k)] = spec?.list && !Array.isArray(v) ? [v] : v;
  }
  return out;
}

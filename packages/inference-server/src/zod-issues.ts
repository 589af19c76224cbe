/**
 * A zod issue of a request's validation as OpenAI's 400: the field named as OpenAI names it
 * (`messages[0].content`), what was expected and what came, in OpenAI's words. Every protocol's
 * parser reports its first issue through it. Pure.
 */
import type { z } from '@vigil/shared-types';
import { type ApiError, invalid } from './errors.js';

/** `messages[0].content` from zod's path. */
export function paramName(path: readonly PropertyKey[]): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : `${s === '' ? '' : '.'}${String(p)}`;
  return s;
}

/** What a JSON value is, in OpenAI's words. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'number') return Number.isInteger(v) ? 'an integer' : 'a decimal';
  return `a ${typeof v}`;
}

const EXPECTED: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  boolean: 'a boolean',
  array: 'an array',
  object: 'an object',
  record: 'an object',
};

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let v = body;
  for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[p] : undefined;
  return v;
}

const UNION_EXPECTED: Record<string, string> = {
  tool_choice: '"none", "auto", "required" or {"type":"function","function":{"name":…}}',
  response_format:
    '{"type":"text"}, {"type":"json_object"} or {"type":"json_schema","json_schema":{"name":…,"schema":{…}}}',
};

/** The first problem zod found, as OpenAI's 400 (`body` is the whole request, `issue.path` from its root). */
export function toInvalid(issue: z.core.$ZodIssue, body: unknown): ApiError {
  const param = paramName(issue.path);
  const value = valueAt(body, issue.path);
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined)
        return invalid(`you must provide a ${param} parameter`, param, 'missing_required_parameter');
      return invalid(
        `Invalid type for '${param}': expected ${EXPECTED[issue.expected] ?? issue.expected}, but got ${kindOf(value)} instead.`,
        param,
        'invalid_type',
      );
    case 'invalid_union':
      if (UNION_EXPECTED[param]) {
        return invalid(`Invalid '${param}': expected ${UNION_EXPECTED[param]}.`, param, 'invalid_value');
      }
      if (param.endsWith('.content')) {
        return invalid(
          `Invalid '${param}': expected a string or an array of text parts ({"type":"text","text":…}); other parts are not supported.`,
          param,
          'invalid_type',
        );
      }
      return invalid(`Invalid type for '${param}': got ${kindOf(value)}.`, param, 'invalid_type');
    case 'too_small':
    case 'too_big': {
      const bound = issue.code === 'too_small' ? `at least ${issue.minimum}` : `at most ${issue.maximum}`;
      if (issue.origin === 'array') {
        const code =
          issue.code === 'too_small' && Array.isArray(value) && value.length === 0 ? 'empty_array' : 'invalid_value';
        return invalid(
          `Invalid '${param}': must have ${bound} items, got ${(value as unknown[]).length}.`,
          param,
          code,
        );
      }
      if (issue.origin === 'string') return invalid(`Invalid '${param}': must not be empty.`, param, 'invalid_value');
      return invalid(`Invalid '${param}': must be ${bound}, got ${String(value)}.`, param, 'invalid_value');
    }
    case 'invalid_value':
      return invalid(
        `Invalid '${param}': must be one of ${issue.values.map(String).join(', ')}; got ${JSON.stringify(value)}.`,
        param,
        'invalid_value',
      );
    default:
      return invalid(`Invalid '${param}': ${issue.message}.`, param, 'invalid_value');
  }
}

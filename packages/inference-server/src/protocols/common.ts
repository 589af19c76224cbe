/**
 * What the protocol adapters share: checking a part of a body against a zod schema with the
 * error naming the field from the body's root, hosted tools (which the server cannot run) left
 * out with one log line per kind, or refused under --strict-tools, and the trimming of streamed
 * function-call arguments. Pure but for the one log line.
 */
import type { z } from '@vigil/shared-types';
import { invalid } from '../errors.js';
import type { Logger } from '../logger.js';
import { ANNOTATIONS, ENFORCED, FORMATS } from '../schema.js';
import { toInvalid } from '../zod-issues.js';

/** `value` (found at `path` in `root`) checked against `schema`; a 400 naming the field when it fails. */
export function check<T extends z.ZodType>(
  schema: T,
  value: unknown,
  root: unknown,
  path: readonly PropertyKey[],
): z.output<T> {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw toInvalid({ ...issue, path: [...path, ...issue.path] } as typeof issue, root);
  }
  return r.data;
}

/** A value that must be a JSON object (the request body, an item). */
export function objectAt(value: unknown, param: string | null): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid(
      param === null ? 'The request body must be a JSON object.' : `Invalid type for '${param}': expected an object.`,
      param,
      'invalid_type',
    );
  }
  return value as Record<string, unknown>;
}

/** Hosted tools: the kinds already logged (one line per kind for the life of the server). */
export class HostedTools {
  private readonly logged = new Set<string>();

  constructor(
    private readonly strict: boolean,
    private readonly logger: Logger,
  ) {}

  /** A hosted tool of kind `type` at `param`: logged once and left out, or a 400 (--strict-tools). */
  leaveOut(type: string, param: string, route: string): void {
    if (this.strict) {
      throw invalid(
        `Invalid '${param}': the hosted tool ${JSON.stringify(type)} cannot run on this server (--strict-tools).`,
        param,
        'unsupported_value',
      );
    }
    if (this.logged.has(type)) return;
    this.logged.add(type);
    this.logger.info('hosted tool left out: this server cannot run it; the model does not see it', {
      tool: type,
      route,
    });
  }
}

/**
 * The pieces of one choice's streamed call arguments: whitespace after the arguments' JSON
 * (which the function-call syntax may add) is held back, and dropped if nothing follows it.
 */
export class CallPieces {
  private held = '';
  private current = -1;

  /** Whether the piece starts call `callIndex`, and the text to send now ('' for none). */
  add(callIndex: number, text: string): { first: boolean; text: string } {
    const first = callIndex !== this.current;
    if (first) {
      this.current = callIndex;
      this.held = '';
    }
    const all = this.held + text;
    const body = all.trimEnd();
    this.held = all.slice(body.length);
    return { first, text: body };
  }
}

/** What an any-value schema becomes for a non-strict tool: any JSON scalar. */
const ANY_SCALAR = { oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }] };
const SCHEMA_LISTS = new Set(['oneOf', 'anyOf', 'prefixItems']);
const SCHEMA_MAPS = new Set(['properties', '$defs', 'definitions']);

/**
 * The parameters of a tool that is not `strict`, made fit for the grammar as agents' tools need
 * (Claude Code's and Codex's schemas carry `minimum`, `pattern`, `format: uri`, …): keywords the
 * grammar cannot enforce are dropped (the client still validates the call against its own
 * schema), and a schema that allows any value becomes any JSON scalar. What the grammar enforces
 * is kept as it is; a `strict` tool's schema is not relaxed (400 naming the keyword, as in chat).
 */
export function lenientSchema(node: unknown): unknown {
  const isObject = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  if (node === true) return ANY_SCALAR;
  if (!isObject(node)) return node;
  const kept = Object.entries(node).filter(
    ([k, v]) => ANNOTATIONS.has(k) || (ENFORCED.has(k) && !(k === 'format' && !FORMATS.has(String(v)))),
  );
  if (kept.every(([k]) => ANNOTATIONS.has(k))) return { ...Object.fromEntries(kept), ...ANY_SCALAR };
  const out: Record<string, unknown> = {};
  for (const [k, v] of kept) {
    if (SCHEMA_LISTS.has(k) && Array.isArray(v)) out[k] = v.map(lenientSchema);
    else if (SCHEMA_MAPS.has(k) && isObject(v)) {
      out[k] = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, lenientSchema(s)]));
    } else if ((k === 'items' || k === 'additionalProperties') && isObject(v)) out[k] = lenientSchema(v);
    else out[k] = v;
  }
  return out;
}

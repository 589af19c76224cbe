/**
 * The pure rules of the guardian's recovery decisions (issues 18 and 19): the busy deferral, the
 * start-up grace, which root causes a fallback swap replaces.
 */
import type { BusyAnswer, RootCause } from './machine-types.js';

/**
 * Busy deferral (spec 3.1, DESIGN 5, issue 30): a client's success within the busy window defers
 * the probes only while the server is busy: work in flight that is progressing. A server that
 * reports no progress past its bound, has no work, or cannot say so within `busyCheckS` is not
 * busy, and is probed. A server that answers but reports no progress keeps the spec's rule
 * (it answered: busy). `answer` null: not checked yet. 'check': ask the server; 'skip':
 * `probe_skip_busy`; 'probe': the normal probes.
 */
export function busyDecision(
  lastSuccessAt: number | null,
  now: number,
  busyWindowS: number,
  answer: BusyAnswer | null,
): 'check' | 'skip' | 'probe' {
  if (lastSuccessAt === null || !(now - lastSuccessAt < busyWindowS)) return 'probe';
  if (answer === null) return 'check';
  return answer === 'progressing' || answer === 'unreported' ? 'skip' : 'probe';
}

/** Causes that mean "not up yet" while a backend starts: refused connections, 503 `model_loading`. */
const LOADING_CAUSES: ReadonlySet<RootCause> = new Set(['refused', 'loading']);

/**
 * A failed probe that is a backend still starting within its start-up grace (after a start,
 * restart, restore or fallback of the guardian's): "loading", not a failure.
 */
export function isLoading(graceUntil: number | null, now: number, cause: RootCause | undefined): boolean {
  return graceUntil !== null && now < graceUntil && cause !== undefined && LOADING_CAUSES.has(cause);
}

/** Root causes that are symptoms of a dying primary: a fallback swap replaces them with its one cause. */
export const SYMPTOMS: ReadonlySet<string> = new Set([
  'timeout',
  'refused',
  'reset',
  'network',
  'http_error',
  'empty_reply',
  'no_content',
  'loading',
]);

/**
 * Which web pages may talk to a vigil listener: the one rule of the inference server's and the
 * daemon's `--allow-origin`. A browser always sends `Origin` on a cross-origin request (and on
 * every `EventSource`/`fetch` to another origin); a request with an `Origin` that is not in the
 * operator's allowlist is refused (403), preflight included, and gets no CORS headers. No
 * `Origin` at all is not a browser's cross-origin request (curl, an SDK, a consumer) and passes.
 * Pure: the listeners apply the verdict.
 */
import { ConfigError } from './errors.js';

/** `scheme://host[:port]` in its canonical form, or null for anything that is not an http(s) origin. */
export function canonicalOrigin(text: string): string | null {
  let u: URL;
  try {
    u = new URL(text.trim());
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  if (u.username !== '' || u.password !== '' || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) {
    return null;
  }
  return u.origin;
}

export type OriginRule =
  /** No Origin header: nothing to check. */
  | { readonly kind: 'none' }
  /** An origin that is not allowed (or not an origin at all): 403. */
  | { readonly kind: 'refused'; readonly origin: string }
  /** An allowed origin, canonical: its CORS headers name it. */
  | { readonly kind: 'allowed'; readonly origin: string };

/** The verdict on a request's `Origin` header against `allowed` (canonical origins). */
export function judgeOrigin(header: string | readonly string[] | undefined, allowed: ReadonlySet<string>): OriginRule {
  if (header === undefined) return { kind: 'none' };
  const text = typeof header === 'string' ? header : header.join(',');
  const origin = canonicalOrigin(text);
  return origin !== null && allowed.has(origin) ? { kind: 'allowed', origin } : { kind: 'refused', origin: text };
}

/**
 * The allowlist from `--allow-origin` values; throws with the first value that is not an http(s)
 * origin (`scheme://host[:port]`, nothing after).
 */
export function parseAllowedOrigins(values: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const v of values) {
    const origin = canonicalOrigin(v);
    if (origin === null)
      throw new ConfigError(`invalid origin "${v}": expected scheme://host[:port], e.g. http://localhost:3000`);
    out.add(origin);
  }
  return out;
}

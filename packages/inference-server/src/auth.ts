/**
 * The optional API key of the plain listener (`--api-key-file`): `Authorization: Bearer KEY` or
 * `x-api-key: KEY`, compared in constant time (digests of equal length, `timingSafeEqual`). The mTLS listener needs
 * no key: its client certificate is the credential. `/health` stays open for probes.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** The request's bearer token; null when it has none. */
export function bearerToken(req: IncomingMessage): string | null {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return null;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(h);
  return m ? m[1]! : null;
}

/** The key a request carries: `Authorization: Bearer KEY`, or `x-api-key: KEY` (Anthropic's clients). */
export function requestKey(req: IncomingMessage): string | null {
  const bearer = bearerToken(req);
  if (bearer !== null) return bearer;
  const h = req.headers['x-api-key'];
  return typeof h === 'string' && h.trim() !== '' ? h.trim() : null;
}

/** Whether `token` is `key`, in time that does not depend on where they differ. */
export function keyMatches(token: string | null, key: string): boolean {
  if (token === null) return false;
  return timingSafeEqual(digest(token), digest(key));
}

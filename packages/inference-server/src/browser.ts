/**
 * Refusing web pages the operator did not invite. A page in the user's browser can send "simple"
 * requests to 127.0.0.1 without a CORS preflight (a `text/plain` POST, or a body with no type);
 * it cannot set `Content-Type: application/json` without one, and it always sends `Origin`. So:
 * a request with an `Origin` not in `--allow-origin` gets 403 (preflight included, and no CORS
 * headers), and a POST body must be `application/json` (415). An allowed origin gets the CORS
 * headers it needs, and its preflight a 204.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { judgeOrigin } from '@vigil/shared-types';
import { ApiError } from './errors.js';

/** The one origin rule of vigil's listeners (shared with the messaging daemon). */
export { canonicalOrigin } from '@vigil/shared-types';

export const originNotAllowed = (origin: string): ApiError =>
  new ApiError(
    403,
    `Requests from the web origin ${origin} are not allowed (the operator can allow it with --allow-origin).`,
    'invalid_request_error',
    null,
    'origin_not_allowed',
  );

export const unsupportedMediaType = (type: string | undefined): ApiError =>
  new ApiError(
    415,
    `The request body must be JSON sent with Content-Type: application/json${type ? `, not ${type}` : ''}.`,
    'invalid_request_error',
    null,
    'unsupported_media_type',
  );

/** True when the request's Content-Type is `application/json` (any parameters, any case). */
export function isJsonBody(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return type !== undefined && type.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

export type OriginVerdict =
  /** No Origin header: not a browser's cross-origin request; nothing to add. */
  | { readonly kind: 'none' }
  /** An origin not in the allowlist: answer 403, no CORS headers. */
  | { readonly kind: 'refused'; readonly error: ApiError }
  /** An allowed origin's preflight: answered here (204). */
  | { readonly kind: 'preflight' }
  /** An allowed origin: its CORS headers are set on the reply; go on. */
  | { readonly kind: 'allowed' };

/**
 * Checks `Origin` against `allowed` (canonical origins). For an allowed origin it sets the CORS
 * headers on `res`, and answers its preflight (OPTIONS with Access-Control-Request-Method).
 */
export function checkOrigin(req: IncomingMessage, res: ServerResponse, allowed: ReadonlySet<string>): OriginVerdict {
  const rule = judgeOrigin(req.headers.origin, allowed);
  if (rule.kind === 'none') return rule;
  if (rule.kind === 'refused') return { kind: 'refused', error: originNotAllowed(rule.origin) };
  const origin = rule.origin;
  res.setHeader('access-control-allow-origin', origin);
  res.setHeader('vary', 'Origin');
  res.setHeader('access-control-expose-headers', 'Retry-After');
  if (req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined) {
    const requested = req.headers['access-control-request-headers'];
    res.writeHead(204, {
      'access-control-allow-methods': 'GET, POST, OPTIONS',
      'access-control-allow-headers': requested ?? 'authorization, content-type',
      'access-control-max-age': '600',
      'content-length': '0',
    });
    res.end();
    return { kind: 'preflight' };
  }
  return { kind: 'allowed' };
}

/**
 * Who may do what. Reading needs nothing but a loopback Host (DNS rebinding: any other Host is
 * 421). An action (POST) must come from the page's own origin (an `Origin` naming this Host and/or
 * `Sec-Fetch-Site: same-origin`, neither saying otherwise), as JSON (a cross-site HTML form can send only
 * text/plain, urlencoded or multipart bodies without a preflight), with the token of the stack's
 * home in `X-Vigil-Token`. Pure: headers in, a refusal (status and reason) or null out.
 */
import { timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { hostAllowed, hostHeaderName, isLoopbackHost } from '@vigil/shared-types';

export type Headers = Readonly<Record<string, string | string[] | undefined>>;

export interface Refusal {
  readonly status: 403 | 421;
  readonly error: string;
}

const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/**
 * null when the Host header is one this page answers to: a loopback name, the bound address, or
 * any IP literal. A rebinding attack needs a DNS name that points at 127.0.0.1, so a name other
 * than localhost is refused even when the page listens on every address (in a container).
 */
export function checkHost(headers: Headers, bindHost: string): Refusal | null {
  const host = one(headers.host);
  if (
    host !== undefined &&
    hostAllowed(host, bindHost) &&
    (isIP(hostHeaderName(host)) !== 0 || isLoopbackHost(hostHeaderName(host)))
  ) {
    return null;
  }
  return { status: 421, error: `Host "${host ?? ''}" is not this status page (DNS rebinding refused)` };
}

export function tokensEqual(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && b.length > 0 && timingSafeEqual(a, b);
}

/** null when a POST may act; else why not. `token`: the token file's contents (null: none). */
export function checkAction(headers: Headers, token: string | null): Refusal | null {
  const host = one(headers.host);
  const origin = one(headers.origin);
  const site = one(headers['sec-fetch-site']);
  if (!host) return { status: 403, error: 'an action needs a Host header' };
  // A browser sends Origin on every cross-origin POST and Sec-Fetch-Site on every request (some
  // leave Origin out of same-origin ones): one of them must say "this page", and neither may say
  // anything else.
  if (origin === undefined && site === undefined) {
    return { status: 403, error: 'an action must come from the page (Origin or Sec-Fetch-Site: same-origin)' };
  }
  if (origin !== undefined) {
    let url: URL | null = null;
    try {
      url = new URL(origin);
    } catch {
      // "null" (an opaque origin: a sandboxed frame, a file) or worse
    }
    if (url?.protocol !== 'http:' || url.host !== host.toLowerCase()) {
      return { status: 403, error: `cross-origin request refused (Origin ${origin}, Host ${host})` };
    }
  }
  if (site !== undefined && site !== 'same-origin')
    return { status: 403, error: `cross-site request refused (${site})` };
  const type = one(headers['content-type']) ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    return { status: 403, error: `an action is a JSON request (Content-Type ${type || 'missing'} refused)` };
  }
  if (token === null) return { status: 403, error: 'no token file: actions are off' };
  if (!tokensEqual(one(headers['x-vigil-token']) ?? '', token)) return { status: 403, error: 'missing or wrong token' };
  return null;
}

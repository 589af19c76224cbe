/** Answers of the status page, every one with the same security headers. */
import type { ServerResponse } from 'node:http';

export const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // same-origin, not no-referrer: with no-referrer a browser sends no Origin on the page's own POSTs.
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

export function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export const json = (res: ServerResponse, status: number, v: unknown): void =>
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(v));

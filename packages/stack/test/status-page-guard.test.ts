/**
 * Who may read and act on the status page (guard.ts): DNS rebinding, cross-site requests, simple
 * (form) requests and the token, header by header. The browser test proves the same against a
 * real Chromium; these cover the cases a browser cannot be made to send.
 */
import { describe, expect, it } from '@jest/globals';
import { checkAction, checkHost, tokensEqual } from '../src/status-page/guard.js';

const TOKEN = 'a'.repeat(64);
const page = {
  host: '127.0.0.1:8099',
  origin: 'http://127.0.0.1:8099',
  'content-type': 'application/json',
  'x-vigil-token': TOKEN,
};

describe('the status page guard', () => {
  it('answers loopback names and IP literals, never another DNS name (rebinding), even on a wildcard address', () => {
    for (const host of ['127.0.0.1:8099', 'localhost:8099', '[::1]:8099', 'LOCALHOST']) {
      expect(checkHost({ host }, '127.0.0.1')).toBeNull();
    }
    for (const host of ['evil.example:8099', 'attacker.test', undefined]) {
      expect(checkHost({ host }, '127.0.0.1')).toMatchObject({ status: 421 });
    }
    expect(checkHost({ host: '172.18.0.4:8099' }, '0.0.0.0')).toBeNull();
    expect(checkHost({ host: 'rebound.example:8099' }, '0.0.0.0')).toMatchObject({ status: 421 });
    // Bound to loopback, another IP literal is not this page either.
    expect(checkHost({ host: '10.0.0.5:8099' }, '127.0.0.1')).toMatchObject({ status: 421 });
  });

  it("lets the page's own JSON request with the token act", () => {
    expect(checkAction(page, TOKEN)).toBeNull();
    // Chromium leaves Origin out of same-origin requests and says so in Sec-Fetch-Site.
    const { origin: _, ...noOrigin } = page;
    expect(checkAction({ ...noOrigin, 'sec-fetch-site': 'same-origin' }, TOKEN)).toBeNull();
    expect(checkAction({ ...page, 'content-type': 'application/json; charset=utf-8' }, TOKEN)).toBeNull();
  });

  it('refuses other origins, cross-site fetches, and requests that prove no origin at all', () => {
    const refused = (h: Record<string, string | undefined>) => checkAction({ ...page, ...h }, TOKEN)?.status;
    expect(refused({ origin: 'http://evil.example' })).toBe(403);
    expect(refused({ origin: 'http://localhost:8099' })).toBe(403); // another origin to a browser
    expect(refused({ origin: 'https://127.0.0.1:8099' })).toBe(403);
    expect(refused({ origin: 'null' })).toBe(403); // a sandboxed frame
    expect(refused({ 'sec-fetch-site': 'cross-site' })).toBe(403);
    expect(refused({ 'sec-fetch-site': 'same-site' })).toBe(403);
    expect(refused({ origin: undefined })).toBe(403);
  });

  it('refuses what a form can send (text/plain, urlencoded, multipart) and a missing or wrong token', () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', '']) {
      expect(checkAction({ ...page, 'content-type': type }, TOKEN)).toMatchObject({ status: 403 });
    }
    expect(checkAction({ ...page, 'x-vigil-token': undefined }, TOKEN)).toMatchObject({ status: 403 });
    expect(checkAction({ ...page, 'x-vigil-token': 'b'.repeat(64) }, TOKEN)).toMatchObject({ status: 403 });
    expect(checkAction(page, null)).toMatchObject({ status: 403, error: expect.stringMatching(/no token file/) });
    expect(tokensEqual('', '')).toBe(false);
    expect(tokensEqual(TOKEN, TOKEN)).toBe(true);
  });
});

import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  AddressError,
  formatHostPort,
  isLoopbackHost,
  isWildcardHost,
  parseHostPort,
  parseListen,
} from '../src/net.js';

describe('parseHostPort', () => {
  it('reads host:port, [v6]:port, :port and a bare port', () => {
    expect(parseHostPort('10.0.0.1:7583')).toEqual({ host: '10.0.0.1', port: 7583 });
    expect(parseHostPort('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(parseHostPort(':0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseHostPort('1337', '127.0.0.2')).toEqual({ host: '127.0.0.2', port: 1337 });
    expect(parseHostPort('localhost:1')).toEqual({ host: 'localhost', port: 1 });
  });

  it('rejects bad input with a message naming it', () => {
    for (const bad of ['', 'host:', 'host:65536', 'host:-1', 'host:1x', '::1:80', '[::1]80', ':']) {
      expect(() => parseHostPort(bad)).toThrow(AddressError);
    }
    expect(() => parseHostPort('127.0.0.1:99999')).toThrow(/invalid port "99999"/);
  });

  it('round-trips through formatHostPort', () => {
    const host = fc.oneof(fc.ipV4(), fc.ipV6(), fc.domain());
    fc.assert(
      fc.property(host, fc.integer({ min: 0, max: 65535 }), (h, port) => {
        expect(parseHostPort(formatHostPort({ host: h, port }))).toEqual({ host: h, port });
      }),
    );
  });

  it('reads "off" as no listener', () => {
    expect(parseListen('off')).toBeNull();
    expect(parseListen('OFF')).toBeNull();
    expect(parseListen('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
  });
});

describe('isLoopbackHost', () => {
  it('knows loopback from everything else', () => {
    for (const h of ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) {
      expect(isLoopbackHost(h)).toBe(true);
    }
    for (const h of ['10.0.0.1', '0.0.0.0', '::', '128.0.0.1', '127.0.0.256', 'example.com', '1.127.0.0']) {
      expect(isLoopbackHost(h)).toBe(false);
    }
    expect(isWildcardHost('0.0.0.0')).toBe(true);
    expect(isWildcardHost('[::]')).toBe(true);
    expect(isWildcardHost('127.0.0.1')).toBe(false);
  });
});

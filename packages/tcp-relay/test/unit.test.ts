import { describe, expect, it } from '@jest/globals';
import { RELAY_REFUSED_METHODS } from '@vigil/shared-types';
import fc from 'fast-check';
import { allowed, defaultAllow, parseCidr } from '../src/cidr.js';
import { MethodFilter } from '../src/filter.js';

describe('CIDR allowlists', () => {
  it('matches IPv4, IPv6 and IPv4-mapped addresses against their ranges', () => {
    const ranges = [parseCidr('10.0.0.0/24'), parseCidr('127.0.0.0/8'), parseCidr('fd00::/64')];
    expect(allowed('10.0.0.42', ranges)).toBe(true);
    expect(allowed('::ffff:10.0.0.7', ranges)).toBe(true);
    expect(allowed('10.0.1.1', ranges)).toBe(false);
    expect(allowed('127.9.9.9', ranges)).toBe(true);
    expect(allowed('fd00::1234', ranges)).toBe(true);
    expect(allowed('fd00:0:0:1::1', ranges)).toBe(false);
    expect(allowed('::1', ranges)).toBe(false);
    expect(allowed(undefined, ranges)).toBe(false);
    expect(allowed('192.168.1.1', [parseCidr('0.0.0.0/0')])).toBe(true);
  });

  it("defaults to the link's /24 and loopback", () => {
    const d = defaultAllow('10.0.0.1');
    expect(d.map((c) => c.text)).toEqual(['127.0.0.0/8', '::1/128', '10.0.0.1/24']);
    expect(allowed('10.0.0.200', d)).toBe(true);
    expect(allowed('::1', d)).toBe(true);
    expect(allowed('10.0.1.200', d)).toBe(false);
  });

  it('refuses malformed ranges with a message', () => {
    for (const bad of ['10.0.0.0/33', '10.0.0/8', 'fe80::/129', 'x/1', '1.2.3.4/1/2', '']) {
      expect(() => parseCidr(bad)).toThrow(/invalid CIDR/);
    }
  });
});

describe('the method filter', () => {
  const filter = new MethodFilter();
  const line = (v: unknown) => Buffer.from(JSON.stringify(v));

  it('lets ordinary calls through untouched and refuses startLink with the id', () => {
    expect(filter.judge(line({ jsonrpc: '2.0', method: 'send', params: { message: 'startLink' }, id: 1 }))).toEqual({
      forward: true,
    });
    expect(filter.judge(line({ jsonrpc: '2.0', method: 'startLink', id: 'abc' }))).toEqual({
      forward: false,
      refused: ['startLink'],
      paths: [],
      unreadable: false,
      reply: {
        jsonrpc: '2.0',
        error: { code: -32601, message: 'Method startLink is not available through the relay', data: null },
        id: 'abc',
      },
    });
  });

  it('refuses a refused notification silently, and a whole batch that contains one', () => {
    expect(filter.judge(line({ jsonrpc: '2.0', method: 'register' }))).toEqual({
      forward: false,
      refused: ['register'],
      paths: [],
      unreadable: false,
      reply: undefined,
    });
    const v = filter.judge(
      line([
        { jsonrpc: '2.0', method: 'version', id: 1 },
        { jsonrpc: '2.0', method: 'finishLink', id: 2 },
        { jsonrpc: '2.0', method: 'version' },
      ]),
    );
    expect(v).toMatchObject({
      forward: false,
      refused: ['finishLink'],
      reply: [
        { id: 1, error: { code: -32600, message: 'Batch refused by the relay: it contains finishLink' } },
        { id: 2, error: { code: -32601 } },
      ],
    });
  });

  it('cannot be fooled by escapes, whitespace or key order: it decides as a JSON parser reads', () => {
    const escapeSome = (s: string, mask: number[]) =>
      [...s]
        .map((ch, i) => (mask[i % mask.length] ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}` : ch))
        .join('');
    const method = fc.oneof(
      fc.constantFrom(...RELAY_REFUSED_METHODS),
      fc.constantFrom('send', 'version', 'listGroups', 'startLinks', 'StartLink'),
    );
    fc.assert(
      fc.property(
        method,
        fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 1, maxLength: 5 }),
        fc.boolean(),
        fc.boolean(),
        (m, mask, spaced, idFirst) => {
          const key = escapeSome('method', mask.slice().reverse());
          const value = escapeSome(m, mask);
          const sp = spaced ? ' \t ' : '';
          const fields = [`"jsonrpc"${sp}:${sp}"2.0"`, `"${key}"${sp}:${sp}"${value}"`];
          const text = `{${sp}${(idFirst ? ['"id":7', ...fields] : [...fields, '"id":7']).join(`${sp},${sp}`)}${sp}}`;
          expect(JSON.parse(text).method).toBe(m);
          const v = filter.judge(Buffer.from(text));
          expect(v.forward).toBe(!(RELAY_REFUSED_METHODS as readonly string[]).includes(m));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('decides as a JSON parser does whatever escapes the other strings hold (\\" \\\\ \\/ \\n \\u…)', () => {
    const refused = RELAY_REFUSED_METHODS as readonly string[];
    const piece = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 8 }),
      fc.constantFrom('"', '\\', '\n', '/', '\u0000', 'startLink', '"startLink"', '\\u004c', ...refused),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...refused, 'send', 'version', 'startLinks'),
        fc.array(piece, { maxLength: 6 }),
        fc.boolean(),
        (m, texts, slashes) => {
          let text = JSON.stringify({ jsonrpc: '2.0', method: m, params: { message: texts.join(''), texts }, id: 1 });
          if (slashes) text = text.replace(/\//g, '\\/'); // JSON.stringify never writes \/, a sender may
          expect(JSON.parse(text).method).toBe(m);
          expect(filter.judge(Buffer.from(text)).forward).toBe(!refused.includes(m));
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('refuses what it must read but cannot parse, as the daemon would (a laxer parser behind it cannot read it otherwise)', () => {
    const parseError = {
      jsonrpc: '2.0',
      error: { code: -32700, message: 'Parse error: the relay cannot read this request as JSON', data: null },
      id: null,
    };
    for (const bad of [
      '{"method":"startLink"',
      '{"jsonrpc":"2.0","method":"send","params":{"attachments":"/etc/passwd"},"id":1} trailing',
      '{"x":"\\u00"}',
    ]) {
      expect(filter.judge(Buffer.from(bad))).toMatchObject({ forward: false, unreadable: true, reply: parseError });
    }
    expect(filter.judge(Buffer.from([0x22, 0x5c, 0x75, 0xff]))).toMatchObject({ forward: false, unreadable: true });
    // Without a refused name or a \u escape nothing is read: the daemon answers it.
    expect(filter.judge(Buffer.from('{"method":"send"'))).toEqual({ forward: true });
    expect(filter.judge(Buffer.from([0x22, 0xff, 0x5c]))).toEqual({ forward: true });
  });

  it('takes a list of its own', () => {
    const f = new MethodFilter(['send']);
    expect(f.judge(line({ jsonrpc: '2.0', method: 'startLink', id: 1 }))).toEqual({ forward: true });
    expect(f.judge(line({ jsonrpc: '2.0', method: 'send', id: 1 })).forward).toBe(false);
    expect(new MethodFilter([]).judge(line({ jsonrpc: '2.0', method: 'startLink', id: 1 }))).toEqual({ forward: true });
  });

  it('finds a refused name in bytes exactly where a byte search would, whatever characters the names have', () => {
    const chars = [
      'a',
      'b',
      '.',
      '*',
      '+',
      '?',
      '(',
      ')',
      '[',
      ']',
      '{',
      '}',
      '|',
      '^',
      '$',
      '/',
      '-',
      '"',
      '\\',
      'é',
      '😀',
    ];
    const word = fc.array(fc.constantFrom(...chars), { minLength: 1, maxLength: 5 }).map((a) => a.join(''));
    fc.assert(
      fc.property(
        fc.array(word, { maxLength: 4 }),
        fc.array(fc.oneof(word, fc.nat(3)), { maxLength: 8 }),
        (names, parts) => {
          const needles = names.map((m) => Buffer.from(JSON.stringify(m)));
          const bytes = Buffer.concat(
            parts.map((p) => (typeof p === 'number' ? (needles[p] ?? Buffer.from([0xff, 0x22])) : Buffer.from(p))),
          );
          expect(new MethodFilter(names, { refuseFilePaths: false }).noRefusedName(bytes)).toBe(
            !needles.some((n) => bytes.indexOf(n) >= 0),
          );
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('scanChunk: the parts put together are the chunk; every line with a \\u escape is judged, no other is', () => {
    const filter = new MethodFilter();
    const line = fc.oneof(
      fc.constant('{"jsonrpc":"2.0","method":"send","params":{"message":"hi"},"id":1}'),
      fc.constant('{"jsonrpc":"2.0","method":"send","params":{"message":"a \\"quote\\""},"id":2}'),
      fc.constant('{"jsonrpc":"2.0","method":"start\\u004cink","id":3}'),
      fc.constant('\\'),
      fc.constant('tail \\u0041'),
      fc.constant(''),
      fc.constant('\r'),
      fc.string({ maxLength: 12 }).map((t) => t.replace(/\n/g, ' ')),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(line, fc.constantFrom('\n', '\r\n')), { maxLength: 12 }),
        fc.string({ maxLength: 8 }).map((t) => t.replace(/\n/g, ' ')),
        (lines, tail) => {
          const chunk = Buffer.from(lines.map(([l, nl]) => l + nl).join('') + tail);
          const scan = filter.scanChunk(chunk)!;
          expect(scan).not.toBeNull(); // no refused name in plain text here
          const joined = Buffer.concat([
            ...scan.parts.flatMap((p) => (p.kind === 'clean' ? [p.bytes] : [p.line, p.newline])),
            scan.rest,
          ]);
          expect(joined.equals(chunk)).toBe(true);
          expect(scan.rest.includes(0x0a)).toBe(false);
          for (const p of scan.parts) {
            if (p.kind === 'judge') {
              expect(p.line.includes('\\u')).toBe(true);
              expect(p.line.includes(0x0a)).toBe(false);
              expect(['\n', '\r\n']).toContain(p.newline.toString());
            } else {
              expect(p.bytes.includes('\\u')).toBe(false);
              expect(p.bytes.at(-1)).toBe(0x0a); // whole lines only
            }
          }
        },
      ),
      { numRuns: 1000 },
    );
    expect(filter.scanChunk(Buffer.from('{"method":"startLink","id":1}\n'))).toBeNull();
    expect(filter.scanChunk(Buffer.from('no newline yet'))).toEqual({ parts: [], rest: Buffer.from('no newline yet') });
  });
});

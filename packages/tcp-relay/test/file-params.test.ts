import { describe, expect, it } from '@jest/globals';
import { FILE_PARAM_KEYS, filePathParams, RELAY_REFUSED_METHODS } from '@vigil/shared-types';
import fc from 'fast-check';
import { MethodFilter } from '../src/filter.js';
import { GuestLines, type Refusal } from '../src/guest-lines.js';

const PASSWD = '/etc/passwd';
const DATA = 'data:text/plain;base64,aGk=';
const req = (params: unknown, extra: Record<string, unknown> = { id: 1 }) => ({
  jsonrpc: '2.0',
  method: 'send',
  params,
  ...extra,
});

describe('file parameters', () => {
  it('knows every spelling signal-cli reads: dashed, camelCase, underscored, singular and plural', () => {
    expect([...FILE_PARAM_KEYS.keys()].sort()).toEqual(
      [
        'attachment',
        'attachments',
        'avatar',
        'avatars',
        'path',
        'paths',
        'preview-image',
        'preview-images',
        'previewImage',
        'previewImages',
        'preview_image',
        'preview_images',
        'quote-attachment',
        'quote-attachments',
        'quoteAttachment',
        'quoteAttachments',
        'quote_attachment',
        'quote_attachments',
      ].sort(),
    );
  });

  it('finds a path in a string or any element of a list; a data: URI (exactly that prefix) is no path', () => {
    expect(filePathParams(req({ attachments: [PASSWD] }))).toEqual(['attachments']);
    expect(filePathParams(req({ attachment: PASSWD }))).toEqual(['attachment']);
    expect(filePathParams(req({ attachments: [DATA, 'relative.txt'] }))).toEqual(['attachments']);
    expect(filePathParams(req({ attachments: [DATA, DATA] }))).toEqual([]);
    expect(filePathParams(req({ attachments: 'DATA:text/plain,x' }))).toEqual(['attachments']);
    expect(filePathParams(req({ attachments: '' }))).toEqual(['attachments']);
    expect(filePathParams(req({ attachments: [[PASSWD]] }))).toEqual(['attachments']);
    expect(filePathParams(req({ attachments: 5 }))).toEqual([]);
    expect(filePathParams(req({ previewImage: PASSWD, 'preview-image': DATA, avatar: '~/a.png' }))).toEqual([
      'previewImage',
      'avatar',
    ]);
    expect(filePathParams({ jsonrpc: '2.0', method: 'uploadStickerPack', params: { path: '/tmp/pack.zip' } })).toEqual([
      'path',
    ]);
    // Keys that only begin like one, and other params, are not files.
    expect(
      filePathParams(req({ message: PASSWD, attachmentIds: [PASSWD], pathname: PASSWD, sticker: 'ab:1' })),
    ).toEqual([]);
    // At any depth of params, never outside them.
    expect(filePathParams(req({ nested: [{ avatar: PASSWD }] }))).toEqual(['avatar']);
    expect(filePathParams({ jsonrpc: '2.0', method: 'send', attachments: [PASSWD], id: 1 })).toEqual([]);
    expect(filePathParams([req({ attachments: PASSWD })])).toEqual([]); // one element at a time
  });

  it('reads a quote attachment as signal-cli does: contentType[:filename[:previewFile]]', () => {
    const q = (v: string) => filePathParams(req({ quoteAttachments: [v] }));
    expect(q('image/png')).toEqual([]);
    expect(q('image/png:test.png')).toEqual([]);
    expect(q('image/png:test.png:/tmp/preview.jpg')).toEqual(['quoteAttachments']);
    expect(q('image/png:test.png:preview.jpg')).toEqual(['quoteAttachments']);
    expect(q('image/png:test.png:data:image/png;base64,AA==')).toEqual([]);
  });
});

describe('the filter and file paths', () => {
  const filter = new MethodFilter();
  const judge = (v: unknown) => filter.judge(Buffer.from(JSON.stringify(v)));

  it('refuses a call with a path with -32602 naming the parameter, a notification silently; passes data: URIs', () => {
    expect(judge(req({ recipient: ['+15550000002'], attachments: [PASSWD] }, { id: 'x' }))).toEqual({
      forward: false,
      refused: [],
      paths: ['attachments'],
      unreadable: false,
      reply: {
        jsonrpc: '2.0',
        error: {
          code: -32602,
          message: 'attachments: file paths are not accepted through the relay; send the file as a data: URI',
          data: null,
        },
        id: 'x',
      },
    });
    expect(judge(req({ attachment: PASSWD }, {}))).toMatchObject({ forward: false, reply: undefined });
    expect(judge(req({ attachments: [DATA] }))).toEqual({ forward: true });
    expect(
      new MethodFilter(undefined, { refuseFilePaths: false }).judge(
        Buffer.from(JSON.stringify(req({ attachments: [PASSWD] }))),
      ),
    ).toEqual({
      forward: true,
    });
  });

  it('refuses a whole batch that carries a path in one element', () => {
    const v = judge([
      req({ message: 'hi' }, { id: 1 }),
      req({ attachments: [PASSWD] }, { id: 2 }),
      req({ message: 'note' }, {}),
      { jsonrpc: '2.0', method: 'startLink', id: 3 },
    ]);
    expect(v).toMatchObject({
      forward: false,
      refused: ['startLink'],
      paths: ['attachments'],
      reply: [
        {
          id: 1,
          error: {
            code: -32600,
            message: 'Batch refused by the relay: it contains startLink, a file path in attachments',
          },
        },
        { id: 2, error: { code: -32602 } },
        { id: 3, error: { code: -32601 } },
      ],
    });
  });
});

// ---- The property: whatever the encoding and however the bytes are split, the relay's verdict on
// each line is what a JSON parser's reading of that line calls for.

const FILE_KEYS = [
  'attachment',
  'attachments',
  'previewImage',
  'preview-image',
  'quoteAttachment',
  'quote-attachments',
  'avatar',
  'path',
];
const QUOTE_KEYS = new Set(['quoteAttachment', 'quote-attachments']);
const OTHER_KEYS = ['message', 'recipient', 'attachmentId', 'pathname', 'Attachments', 'sticker'];
const VALUES = [
  PASSWD,
  '/etc/shadow',
  'relative.txt',
  'DATA:x',
  '',
  DATA,
  'data:image/png;filename=a.png;base64,AAAA',
  'image/png',
  'image/png:a.png:/tmp/p.jpg',
  'image/png:a.png:data:image/png;base64,AA',
  '"attachments": "/etc/passwd"',
];

/** The rule, written once more from the decoded object. */
function expectedPaths(element: unknown): boolean {
  if (typeof element !== 'object' || element === null || Array.isArray(element)) return false;
  const isPath = (v: unknown, quote: boolean): boolean => {
    if (typeof v === 'string') {
      if (!quote) return !v.startsWith('data:');
      const m = /^[^:]*:[^:]*:([\s\S]*)$/.exec(v);
      return m !== null && !m[1]!.startsWith('data:');
    }
    return typeof v === 'object' && v !== null && Object.values(v).some((x) => isPath(x, quote));
  };
  const walk = (v: unknown): boolean =>
    typeof v === 'object' &&
    v !== null &&
    Object.entries(v).some(([k, x]) => (FILE_KEYS.includes(k) ? isPath(x, QUOTE_KEYS.has(k)) : false) || walk(x));
  return walk((element as { params?: unknown }).params);
}

/** JSON text with each character of every string written plainly, as \uXXXX, or (a slash) as \/. */
function encode(v: unknown, mask: number[], k = { i: 0 }): string {
  const bit = () => mask[k.i++ % mask.length]!;
  if (typeof v === 'string') {
    const chars = [...v].map((ch) => {
      const b = bit();
      if (b === 1) return [...ch].map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
      if (b === 2 && ch === '/') return '\\/';
      return JSON.stringify(ch).slice(1, -1);
    });
    return `"${chars.join('')}"`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => encode(x, mask, k)).join(bit() === 2 ? ' , ' : ',')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.entries(v)
      .map(([key, x]) => `${encode(key, mask, k)}${bit() === 2 ? ' : ' : ':'}${encode(x, mask, k)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

const value = fc.oneof(
  fc.constantFrom(...VALUES),
  fc.array(fc.constantFrom(...VALUES), { maxLength: 3 }),
  fc.string({ maxLength: 6 }),
  fc.integer(),
);
const request = fc.record({
  method: fc.constantFrom('send', 'updateGroup', 'uploadStickerPack', 'version', 'startLink'),
  params: fc.dictionary(fc.constantFrom(...FILE_KEYS, ...OTHER_KEYS), value, { maxKeys: 3 }),
  id: fc.option(fc.oneof(fc.integer(), fc.string({ maxLength: 4 })), { nil: undefined }),
});
const line = fc.tuple(
  fc.oneof(request, fc.array(request, { minLength: 1, maxLength: 3 })),
  fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 7 }),
  // A lone CR ends a line too, as the daemon and signal-cli (Java's readLine) read lines.
  fc.constantFrom('\n', '\r\n', '\r'),
);

describe('the verdict over a stream of lines', () => {
  it('equals a JSON parser reading of each line, across escapes, batches, CRLF, lone CR and any split points', () => {
    const refusedMethods = new Set<string>(RELAY_REFUSED_METHODS);
    fc.assert(
      fc.property(
        fc.array(line, { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.boolean(),
        (lines, cuts, lastTerminated) => {
          const texts = lines.map(([shape, mask, nl], n) => {
            const withRpc = (r: { method: string; params: unknown; id?: unknown }) =>
              r.id === undefined
                ? { jsonrpc: '2.0', method: r.method, params: r.params }
                : { jsonrpc: '2.0', method: r.method, params: r.params, id: r.id };
            const obj = Array.isArray(shape) ? shape.map(withRpc) : withRpc(shape);
            const text = encode(obj, mask);
            return { text, nl: n === lines.length - 1 && !lastTerminated ? '' : nl };
          });
          const stream = Buffer.from(texts.map((t) => t.text + t.nl).join(''));
          // What a JSON parser makes of each line.
          const expected = texts.map(({ text, nl }) => {
            const decoded: unknown = JSON.parse(text);
            const elements = Array.isArray(decoded) ? decoded : [decoded];
            const paths = elements.map(expectedPaths);
            const methods = elements.map((e) => refusedMethods.has((e as { method: string }).method));
            const pass = !paths.some(Boolean) && !methods.some(Boolean);
            const codes = elements.flatMap((e, i) =>
              Object.hasOwn(e as object, 'id') ? [methods[i] ? -32601 : paths[i] ? -32602 : -32600] : [],
            );
            return { pass, bytes: text + nl, codes, batch: Array.isArray(decoded) };
          });
          // The relay's side, fed in chunks cut at arbitrary points.
          const refusals: Refusal[] = [];
          const g = new GuestLines(
            new MethodFilter(),
            1 << 20,
            (r) => refusals.push(r),
            () => {
              throw new Error('no line is oversize here');
            },
          );
          const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((a, b) => a - b);
          const out: Uint8Array[] = [];
          let at = 0;
          for (const p of [...points, stream.length]) {
            out.push(...g.push(stream.subarray(at, p)));
            at = p;
          }
          out.push(...g.end());
          expect(Buffer.concat(out).toString()).toBe(
            expected
              .filter((e) => e.pass)
              .map((e) => e.bytes)
              .join(''),
          );
          const refused = expected.filter((e) => !e.pass);
          expect(refusals).toHaveLength(refused.length);
          refusals.forEach((r, i) => {
            const e = refused[i]!;
            const replies = r.reply === undefined ? [] : Array.isArray(r.reply) ? r.reply : [r.reply];
            expect(replies.map((x) => x.error.code)).toEqual(e.codes);
            expect(Array.isArray(r.reply)).toBe(e.batch && e.codes.length > 0);
          });
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('with file paths allowed, forwards every line that names no refused method', () => {
    const g = new GuestLines(
      new MethodFilter(undefined, { refuseFilePaths: false }),
      1 << 20,
      () => {},
      () => {},
    );
    const text = `${JSON.stringify(req({ attachments: [PASSWD] }))}\n{"jsonrpc":"2.0","method":"send","params":{"\\u0061vatar":"\\/x"},"id":2}\r\n`;
    const half = text.length >> 1;
    const out = [...g.push(Buffer.from(text.slice(0, half))), ...g.push(Buffer.from(text.slice(half)))];
    expect(Buffer.concat(out).toString()).toBe(text);
  });
});

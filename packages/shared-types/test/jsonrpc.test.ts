import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { classify, isResponse, parseMessage, RpcErrorCode } from '../src/jsonrpc.js';

describe('parseMessage', () => {
  it('classifies a call, keeping its id (an explicit null id is still a call)', () => {
    expect(parseMessage('{"jsonrpc":"2.0","method":"version","id":7}')).toEqual({
      kind: 'single',
      item: { kind: 'call', id: 7, method: 'version', params: undefined },
    });
    expect(parseMessage('{"jsonrpc":"2.0","method":"version","id":null}')).toEqual({
      kind: 'single',
      item: { kind: 'call', id: null, method: 'version', params: undefined },
    });
  });

  it('classifies a request without an id member as a notification', () => {
    expect(parseMessage('{"jsonrpc":"2.0","method":"send","params":{"message":"x"}}')).toEqual({
      kind: 'single',
      item: { kind: 'notification', method: 'send', params: { message: 'x' } },
    });
  });

  it('answers empty input and bad JSON with a parse error', () => {
    expect(parseMessage('')).toEqual({
      kind: 'error',
      error: { code: RpcErrorCode.PARSE_ERROR, message: 'Empty input line', data: null },
    });
    const bad = parseMessage('{"jsonrpc":');
    expect(bad.kind).toBe('error');
    expect(bad.kind === 'error' && bad.error.code).toBe(-32700);
  });

  it('treats an empty batch as one invalid request and classifies each batch element', () => {
    expect(parseMessage('[]')).toEqual({
      kind: 'error',
      error: { code: -32600, message: 'empty batch', data: null },
    });
    const batch = parseMessage('[{"jsonrpc":"2.0","method":"version","id":"a"}, 1, {"jsonrpc":"2.0","id":2}]');
    expect(batch).toEqual({
      kind: 'batch',
      items: [
        { kind: 'call', id: 'a', method: 'version', params: undefined },
        { kind: 'invalid', id: null, error: { code: -32600, message: 'request must be a JSON object', data: null } },
        { kind: 'invalid', id: 2, error: { code: -32600, message: 'method field must be set', data: null } },
      ],
    });
  });

  it('uses signal-cli messages and keeps a usable id on invalid requests', () => {
    expect(classify({ jsonrpc: '1.0', method: 'version', id: 'x' })).toEqual({
      kind: 'invalid',
      id: 'x',
      error: { code: -32600, message: 'only jsonrpc version 2.0 is supported', data: null },
    });
    expect(classify({ jsonrpc: '2.0', method: 'version', id: { a: 1 } })).toMatchObject({ kind: 'invalid', id: null });
    expect(classify({ jsonrpc: '2.0', method: 'send', params: 5, id: 1 })).toMatchObject({
      kind: 'invalid',
      id: 1,
      error: { code: -32600 },
    });
    // A null params member is treated as absent, as signal-cli does.
    expect(classify({ jsonrpc: '2.0', method: 'version', params: null, id: 1 })).toEqual({
      kind: 'call',
      id: 1,
      method: 'version',
      params: undefined,
    });
  });

  it('never throws, and classifies every JSON value into exactly one kind', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (text) => {
        const parsed = parseMessage(text);
        expect(['single', 'batch', 'error']).toContain(parsed.kind);
        const items = parsed.kind === 'batch' ? parsed.items : parsed.kind === 'single' ? [parsed.item] : [];
        for (const item of items) {
          if (item.kind === 'invalid') expect(item.error.code).toBe(-32600);
          else expect(typeof item.method).toBe('string');
        }
      }),
    );
  });
});

describe('isResponse', () => {
  it('accepts successes and failures, rejects requests and half-shapes', () => {
    expect(isResponse({ jsonrpc: '2.0', result: { version: '1.0.0' }, id: 1 })).toBe(true);
    expect(isResponse({ jsonrpc: '2.0', error: { code: -1, message: 'x', data: null }, id: null })).toBe(true);
    expect(isResponse({ jsonrpc: '2.0', method: 'receive', params: {} })).toBe(false);
    expect(isResponse({ jsonrpc: '2.0', result: 1, error: { code: 1, message: 'x' }, id: 1 })).toBe(false);
    expect(isResponse({ jsonrpc: '2.0', error: { code: 'x' }, id: 1 })).toBe(false);
  });
});

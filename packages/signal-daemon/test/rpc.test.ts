/**
 * The dispatcher and the call counter: a method that answers at once is answered in the same
 * turn (no promise), one that waits through a promise; errors become replies either way, and the
 * counts and the calls under way are the same on both paths.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { parseMessage, RpcErrorCode } from '@vigil/shared-types';
import { invalidParams, RpcFailure } from '../src/errors.js';
import { DaemonMetrics } from '../src/metrics.js';
import { callContext, Dispatcher, type Invoke, isPending } from '../src/rpc.js';

const errors: string[] = [];
const logger = {
  error: (msg: string) => errors.push(msg),
  warn: () => {},
  info: () => {},
  debug: () => {},
};

const call = (method: string, id: number | null = 1, params?: unknown) =>
  parseMessage(JSON.stringify({ jsonrpc: '2.0', method, id, ...(params === undefined ? {} : { params }) }));

/** `now` answers at once, `later` after a turn, `bad` and `broken` throw, `slowBad` rejects. */
const invoke: Invoke = (method, params) => {
  switch (method) {
    case 'now':
      return { echo: params ?? null };
    case 'later':
      return new Promise((resolve) => setImmediate(() => resolve({ later: true })));
    case 'bad':
      throw invalidParams('no');
    case 'broken':
      throw new TypeError('oops');
    case 'slowBad':
      return Promise.reject(new RpcFailure(RpcErrorCode.USER_ERROR, 'later no'));
    default:
      throw new RpcFailure(RpcErrorCode.METHOD_NOT_FOUND, 'Method not implemented');
  }
};

describe('Dispatcher', () => {
  it('answers a method that answers at once without a promise, and one that waits with one', async () => {
    const d = new Dispatcher(logger);
    const now = d.dispatch(call('now', 7, { a: 1 }), invoke);
    expect(isPending(now)).toBe(false);
    expect(now).toEqual({ jsonrpc: '2.0', result: { echo: { a: 1 } }, id: 7 });
    const later = d.dispatch(call('later', 8), invoke);
    expect(isPending(later)).toBe(true);
    expect(d.inFlight).toBe(1);
    expect(await later).toEqual({ jsonrpc: '2.0', result: { later: true }, id: 8 });
    expect(d.inFlight).toBe(0);
  });

  it('turns a thrown or rejected failure into its error reply, anything else into -32603, logged', async () => {
    errors.length = 0;
    const d = new Dispatcher(logger);
    expect(d.dispatch(call('bad', 1), invoke)).toMatchObject({ id: 1, error: { code: -32602 } });
    expect(d.dispatch(call('nope', 2), invoke)).toMatchObject({ id: 2, error: { code: -32601 } });
    expect(errors).toEqual([]);
    expect(d.dispatch(call('broken', 3), invoke)).toMatchObject({
      id: 3,
      error: { code: -32603, message: 'Internal error: oops' },
    });
    expect(errors).toEqual(['method failed unexpectedly']);
    expect(await d.dispatch(call('slowBad', 4), invoke)).toMatchObject({ id: 4, error: { code: -1 } });
    expect(d.inFlight).toBe(0);
  });

  it('gives a notification no reply, on either path', async () => {
    const d = new Dispatcher(logger);
    const note = (method: string) => parseMessage(JSON.stringify({ jsonrpc: '2.0', method }));
    expect(d.dispatch(note('now'), invoke)).toBeUndefined();
    expect(d.dispatch(note('bad'), invoke)).toBeUndefined();
    expect(await d.dispatch(note('later'), invoke)).toBeUndefined();
  });

  it('answers a batch in request order: at once when every element answers at once, else as a promise', async () => {
    const d = new Dispatcher(logger);
    const batch = (items: unknown[]) => parseMessage(JSON.stringify(items));
    const quick = d.dispatch(
      batch([
        { jsonrpc: '2.0', method: 'now', id: 1 },
        { jsonrpc: '2.0', method: 'now' },
        { jsonrpc: '2.0', method: 'bad', id: 2 },
        { nonsense: true },
      ]),
      invoke,
    );
    expect(isPending(quick)).toBe(false);
    expect(quick).toMatchObject([{ id: 1 }, { id: 2, error: { code: -32602 } }, { id: null, error: { code: -32600 } }]);
    const mixed = d.dispatch(
      batch([
        { jsonrpc: '2.0', method: 'later', id: 'a' },
        { jsonrpc: '2.0', method: 'now', id: 'b' },
      ]),
      invoke,
    );
    expect(isPending(mixed)).toBe(true);
    expect(await mixed).toMatchObject([{ id: 'a', result: { later: true } }, { id: 'b' }]);
    expect(d.dispatch(batch([{ jsonrpc: '2.0', method: 'now' }]), invoke)).toBeUndefined();
  });

  it('drains: waits for the calls under way, not for those answered at once', async () => {
    const d = new Dispatcher(logger);
    d.dispatch(call('now'), invoke);
    expect(d.inFlight).toBe(0);
    const started = Date.now();
    await d.drain(5000);
    expect(Date.now() - started).toBeLessThan(1000);
    const pending = d.dispatch(call('later'), invoke);
    expect(d.inFlight).toBe(1);
    await d.drain(5000);
    expect(d.inFlight).toBe(0);
    expect(await pending).toMatchObject({ result: { later: true } });
  });
});

describe('callContext', () => {
  const conn = (destroyed = false) => Object.assign(new EventEmitter(), { destroyed });

  it('makes its signal when first asked for, and aborts it at the first of its events', () => {
    const c = conn();
    const call = callContext(c, ['end', 'close']);
    // Most calls never ask: no listener, no controller until then.
    expect(c.listenerCount('end') + c.listenerCount('close')).toBe(0);
    const gone = call.gone;
    expect(call.gone).toBe(gone);
    expect([c.listenerCount('end'), c.listenerCount('close')]).toEqual([1, 1]);
    expect(gone.aborted).toBe(false);
    c.emit('end');
    expect(gone.aborted).toBe(true);
    // A `close` by default (an HTTP response's).
    const r = conn();
    const byDefault = callContext(r).gone;
    expect(r.listenerCount('close')).toBe(1);
    r.emit('close');
    expect(byDefault.aborted).toBe(true);
  });

  it('is aborted at once for a connection already gone', () => {
    const c = conn(true);
    expect(callContext(c).gone.aborted).toBe(true);
    expect(c.listenerCount('close')).toBe(0);
  });

  it('is an instance of one class, its getter on the prototype (the same shape for every call)', () => {
    const a = callContext(conn());
    const b = callContext(conn());
    expect(Object.getOwnPropertyDescriptor(a, 'gone')).toBeUndefined();
    expect(Object.getPrototypeOf(a)).toBe(Object.getPrototypeOf(b));
    expect(typeof Object.getOwnPropertyDescriptor(Object.getPrototypeOf(a), 'gone')?.get).toBe('function');
  });
});

describe('DaemonMetrics.count', () => {
  it('counts each call once by method, transport and outcome, answered at once or later', async () => {
    const m = new DaemonMetrics();
    const counted = m.count(invoke, 'tcp');
    const d = new Dispatcher(logger);
    for (let i = 0; i < 3; i++) d.dispatch(call('now'), counted);
    await d.dispatch(call('later'), counted);
    d.dispatch(call('bad'), counted);
    d.dispatch(call('nope'), counted);
    d.dispatch(call('broken'), counted);
    await d.dispatch(call('slowBad'), counted);
    const get = (method: string, outcome: string) => m.calls.get([method, 'tcp', outcome]);
    expect(get('now', 'ok')).toBe(3);
    expect(get('later', 'ok')).toBe(1);
    expect(get('bad', 'invalid_params')).toBe(1);
    expect(get('unknown', 'method_not_found')).toBe(1);
    expect(get('broken', 'internal_error')).toBe(1);
    expect(get('slowBad', 'user_error')).toBe(1);
    expect(m.calls.get(['now', 'http', 'ok'])).toBe(0);
    expect(m.calls.samples().reduce((t, s) => t + s.value, 0)).toBe(8);
  });
});

/**
 * The daemon client of shared-types (what the guardian's alerts, the health check and `vigil
 * status` use) against a real daemon: results, typed JSON-RPC errors, a batch in the order of its
 * calls, the check and the JSON status, and the daemon's metrics listener.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { RpcErrorCode } from '@vigil/shared-types';
import { daemonClient, JsonRpcCallError, Wire } from '@vigil/shared-types/node';
import { startDaemon, tmpDir } from './helpers.js';

const tmp = tmpDir();
let d: Awaited<ReturnType<typeof startDaemon>>;
const A = '+15550000001';

beforeAll(async () => {
  d = await startDaemon(tmp.dir, A, { metrics: { host: '127.0.0.1', port: 0 } });
});
afterAll(async () => {
  await d.close();
  tmp.cleanup();
});

describe('daemonClient against the daemon', () => {
  it('calls a method and reads its result', async () => {
    const client = daemonClient(d.http!);
    expect(await client.rpc<{ version: string }>('version')).toEqual({ version: expect.any(String) });
  });

  it("rejects with the daemon's JSON-RPC error, code and data kept", async () => {
    const client = daemonClient(d.http!);
    const err = (await client.rpc('send', { message: 'no recipient' }).catch((e: unknown) => e)) as JsonRpcCallError;
    expect(err).toBeInstanceOf(JsonRpcCallError);
    expect(err.rpcCode).toBe(RpcErrorCode.INVALID_PARAMS);
    expect(err.method).toBe('send');
    const unknown = (await client.rpc('noSuchMethod').catch((e: unknown) => e)) as JsonRpcCallError;
    expect(unknown.rpcCode).toBe(RpcErrorCode.METHOD_NOT_FOUND);
  });

  it('sends a batch in one request and gives the answers in the order of the calls', async () => {
    const client = daemonClient(d.http!, { keepAlive: true });
    const answers = await client.batch([
      { method: 'send', params: { noteToSelf: true, message: 'batched' } },
      { method: 'noSuchMethod' },
      { method: 'version' },
    ]);
    client.close();
    expect(answers[0]).toEqual({ ok: true, result: expect.objectContaining({ timestamp: expect.any(Number) }) });
    expect(answers[1]).toMatchObject({ ok: false, error: { rpcCode: RpcErrorCode.METHOD_NOT_FOUND } });
    expect(answers[2]).toEqual({ ok: true, result: { version: expect.any(String) } });
  });

  it('reads the check and the JSON status; the metrics listener gives Prometheus text', async () => {
    const client = daemonClient(d.http!);
    expect(await client.check()).toBe(true);
    const { serving, status } = await client.status();
    expect(serving).toBe(true);
    expect(status).toMatchObject({ account: A, backend: { kind: 'local', state: 'serving' } });
    expect(await new Wire({ address: d.metrics! }).metrics()).toMatch(/^# HELP vigil_daemon_/m);
  });
});

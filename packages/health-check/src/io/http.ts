/** The daemon and its consumers over the network: a TCP connect, HTTP, JSON-RPC, the daemon's status. Each bounded in time. */
import { request } from 'node:http';
import { connect } from 'node:net';
import { DAEMON_PATHS, type DaemonStatus, type HostPort } from '@vigil/shared-types';
/** True when a TCP connection to the address is accepted within the timeout. */
export function tcpAccepts(addr: HostPort, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host: addr.host, port: addr.port });
    const done = (ok: boolean) => {
      clearTimeout(t);
      s.destroy();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** One HTTP request with a deadline; the body as text. Rejects on any failure. */
export function httpRequest(
  addr: HostPort,
  opts: { method: string; path: string; headers?: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: addr.host, port: addr.port, method: opts.method, path: opts.path, headers: opts.headers, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (body.length < 1 << 20) body += d;
        });
        res.on('end', () => {
          clearTimeout(t);
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    const t = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
    req.end(opts.body);
  });
}

/** A JSON-RPC call over the daemon's HTTP transport: the result, or an Error saying why not. */
export async function rpcCall(addr: HostPort, method: string, params: unknown, timeoutMs: number): Promise<unknown> {
  const r = await httpRequest(
    addr,
    {
      method: 'POST',
      path: DAEMON_PATHS.rpc,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method, params, id: 1 }),
    },
    timeoutMs,
  );
  if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
  const reply = JSON.parse(r.body) as { result?: unknown; error?: { code: number; message: string } };
  if (reply.error) throw new Error(`error ${reply.error.code}: ${reply.error.message}`);
  return reply.result;
}

export async function daemonStatus(addr: HostPort, timeoutMs: number): Promise<DaemonStatus | null> {
  try {
    const r = await httpRequest(
      addr,
      { method: 'GET', path: DAEMON_PATHS.check, headers: { accept: 'application/json' } },
      timeoutMs,
    );
    return r.status === 200 || r.status === 503 ? (JSON.parse(r.body) as DaemonStatus) : null;
  } catch {
    return null;
  }
}

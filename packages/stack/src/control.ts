/**
 * The supervisor's control socket (`run/control.sock` under the home): one JSON request per line,
 * one JSON reply per line, then the connection ends. `vigil status|start|stop|restart` are its
 * clients; so are the guardian and the health check, through `vigil` as their service manager.
 */

import { createConnection, createServer, type Server } from 'node:net';
import type { HostPort } from '@vigil/shared-types';
import { removeFile } from '@vigil/shared-types/light';
import { ControlError, NoStackError } from './errors.js';
import type { ServiceName } from './services.js';

export type ServiceAction = 'start' | 'stop' | 'restart';

export type ControlRequest =
  | { readonly action: 'status' }
  | { readonly action: ServiceAction; readonly service: string }
  /** Stop the whole stack; answered once every service has stopped. */
  | { readonly action: 'shutdown' };

export interface ExitInfo {
  readonly code: number | null;
  readonly signal: string | null;
  /** ISO time. */
  readonly at: string;
}

export interface ServiceStatus {
  readonly name: ServiceName;
  /** `restarting`: it exited by itself and is started again at `restartAt`; `failed`: it exited
   * with a status a restart cannot fix (2, 78) and was left stopped. */
  readonly state: 'running' | 'stopped' | 'restarting' | 'failed';
  readonly pid: number | null;
  /** ISO time the running process was started, null when stopped. */
  readonly startedAt: string | null;
  /** How many times the supervisor started it, and how many of those were restarts. */
  readonly starts: number;
  readonly restarts: number;
  /** ISO time of a restart waiting for its delay, else null. */
  readonly restartAt?: string | null;
  readonly lastExit: ExitInfo | null;
}

export interface SupervisorStatus {
  readonly pid: number;
  readonly home: string;
  readonly startedAt: string;
}

export type ControlReply =
  | {
      readonly ok: true;
      readonly services?: readonly ServiceStatus[];
      readonly supervisor?: SupervisorStatus;
      /** The daemon's HTTP listener (status: its consumers are read there). */
      readonly daemonHttp?: HostPort;
      readonly pid?: number;
    }
  | { readonly ok: false; readonly error: string };

type OkReply = Extract<ControlReply, { ok: true }>;

const MAX_REQUEST = 4096;

/** Opens the control socket (a stale socket file from a killed supervisor is replaced). */
export function serveControl(
  path: string,
  handle: (request: ControlRequest) => Promise<ControlReply>,
): Promise<Server> {
  removeFile(path);
  const server = createServer((c) => {
    let buf = '';
    c.setEncoding('utf8');
    c.on('error', () => {});
    c.on('data', (d: string) => {
      if (buf.includes('\n')) return; // one request per connection
      buf += d;
      if (buf.length > MAX_REQUEST) return void c.destroy();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      let request: ControlRequest;
      try {
        request = JSON.parse(buf.slice(0, nl)) as ControlRequest;
        if (!request || typeof request !== 'object') throw new Error('not an object');
      } catch (err) {
        return void c.end(`${JSON.stringify({ ok: false, error: `bad request: ${(err as Error).message}` })}\n`);
      }
      handle(request).then(
        (reply) => c.end(`${JSON.stringify(reply)}\n`),
        (err: unknown) => c.end(`${JSON.stringify({ ok: false, error: (err as Error).message ?? String(err) })}\n`),
      );
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * Sends one request to the supervisor of `home`; its reply when ok. NoStackError when no
 * supervisor answers there; ControlError when it refused, or gave no answer within `timeoutMs`.
 */
export function controlRequest(
  home: string,
  socket: string,
  request: ControlRequest,
  timeoutMs = 30_000,
): Promise<OkReply> {
  return new Promise((resolve, reject) => {
    const c = createConnection(socket);
    let reply = '';
    let connected = false;
    const timer = setTimeout(() => {
      c.destroy();
      reject(new ControlError(`no answer from the stack within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    c.setEncoding('utf8');
    c.on('connect', () => {
      connected = true;
      c.write(`${JSON.stringify(request)}\n`);
    });
    c.on('data', (d: string) => {
      reply += d;
    });
    c.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        connected
          ? new ControlError(`the stack's answer was cut: ${err.message}`)
          : new NoStackError(home, err.code ?? err.message),
      );
    });
    c.on('end', () => {
      clearTimeout(timer);
      let r: ControlReply;
      try {
        r = JSON.parse(reply) as ControlReply;
      } catch {
        return reject(new ControlError(`unreadable answer: ${reply.slice(0, 200)}`));
      }
      if (r.ok) resolve(r);
      else reject(new ControlError(r.error));
    });
  });
}

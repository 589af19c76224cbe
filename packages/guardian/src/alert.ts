/**
 * The optional alert: one message through the messaging daemon's JSON-RPC `send`
 * (`POST http://HOST:PORT/api/v1/rpc`), bounded in time. It never throws: the caller logs the
 * outcome, and a failed alert changes nothing else.
 */
import { Agent } from 'node:http';
import { DAEMON_PATHS, formatHostPort } from '@vigil/shared-types';
import got from 'got';
import type { AlertConfig } from './config.js';
import { excerpt } from './probe.js';

export interface AlertOutcome {
  readonly ok: boolean;
  readonly detail: string;
}

let nextId = 1;

/** The alert configuration of a message through the daemon (both keys given). */
export type MessageAlertConfig = AlertConfig & Required<Pick<AlertConfig, 'rpc' | 'recipient'>>;

export async function sendAlert(alert: MessageAlertConfig, message: string): Promise<AlertOutcome> {
  const url = `http://${formatHostPort(alert.rpc)}${DAEMON_PATHS.rpc}`;
  const to = alert.recipient.join(', ');
  const agent = new Agent({ keepAlive: false });
  try {
    const res = await got.post(url, {
      json: {
        jsonrpc: '2.0',
        id: `guardian-alert-${nextId++}`,
        method: 'send',
        params: {
          recipient: [...alert.recipient],
          message,
          ...(alert.account ? { account: alert.account } : {}),
        },
      },
      responseType: 'text',
      throwHttpErrors: false,
      retry: { limit: 0 },
      timeout: { request: alert.timeoutS * 1000 },
      agent: { http: agent },
    });
    if (res.statusCode !== 200) return { ok: false, detail: `${url}: HTTP ${res.statusCode}: ${excerpt(res.body)}` };
    let reply: { result?: unknown; error?: { code?: number; message?: string } };
    try {
      reply = JSON.parse(res.body) as typeof reply;
    } catch {
      return { ok: false, detail: `${url}: not a JSON-RPC reply: ${excerpt(res.body)}` };
    }
    if (reply.error) {
      return {
        ok: false,
        detail: `${url}: send to ${to} failed: ${reply.error.code} ${reply.error.message ?? ''}`.trim(),
      };
    }
    return { ok: true, detail: `sent to ${to}` };
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return { ok: false, detail: `${url}: ${e.code ?? ''} ${e.message ?? String(err)}`.trim() };
  } finally {
    agent.destroy();
  }
}

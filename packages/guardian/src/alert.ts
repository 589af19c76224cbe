/**
 * The optional alert: one message through the messaging daemon's JSON-RPC `send`
 * (`POST http://HOST:PORT/api/v1/rpc`, with the daemon's client of shared-types), bounded in time.
 * It never throws: the caller logs the outcome, and a failed alert changes nothing else.
 */
import { daemonClient, JsonRpcCallError } from '@vigil/shared-types/node';
import type { AlertConfig } from './config.js';

export interface AlertOutcome {
  readonly ok: boolean;
  readonly detail: string;
}

/** The alert configuration of a message through the daemon (both keys given). */
export type MessageAlertConfig = AlertConfig & Required<Pick<AlertConfig, 'rpc' | 'recipient'>>;

export async function sendAlert(alert: MessageAlertConfig, message: string): Promise<AlertOutcome> {
  const client = daemonClient(alert.rpc, { timeoutMs: alert.timeoutS * 1000, userAgent: 'vigil-guardian' });
  const to = alert.recipient.join(', ');
  try {
    await client.rpc('send', {
      recipient: [...alert.recipient],
      message,
      ...(alert.account ? { account: alert.account } : {}),
    });
    return { ok: true, detail: `sent to ${to}` };
  } catch (err) {
    const why =
      err instanceof JsonRpcCallError
        ? `send to ${to} failed: ${err.rpcCode} ${err.rpcMessage}`.trim()
        : (err as Error).message;
    return { ok: false, detail: `${client.rpcUrl}: ${why}` };
  }
}

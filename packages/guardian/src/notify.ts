/**
 * Telling a person without the part that broke: the alert (a message through the messaging
 * daemon, and a JSON POST to `alert.webhook`, side by side, each bounded in time) and the
 * dead-man's-switch pings (`ping`: `URL/start` when a tick starts, `URL` or `URL/<code>` when it
 * ends). Neither ever throws: an alert's outcome is an event, a failed ping one line on stderr per
 * episode, and nothing else changes.
 */
import { hostname } from 'node:os';
import { type PingWhat, webhookAlert } from '@vigil/shared-types';
import { postJson, sendPing } from '@vigil/shared-types/node';
import { type MessageAlertConfig, sendAlert } from './alert.js';
import type { GuardianConfig } from './config.js';

export interface AlertResult {
  readonly channel: 'message' | 'webhook';
  readonly ok: boolean;
  readonly detail: string;
}

/** What an alert says: the event (the alerting reason, or `binary_missing`, `fallback_activated`), its message, the last probe. */
export interface AlertContent {
  readonly event: string;
  readonly message: string;
  readonly output: unknown;
}

export class Notifier {
  private pingFailing = false;

  constructor(
    private readonly config: GuardianConfig,
    private readonly say: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  ) {}

  /** Sends the alert on every configured channel at once; the outcome of each. */
  async alert(a: AlertContent): Promise<AlertResult[]> {
    const alert = this.config.alert;
    if (!alert) return [];
    const host = hostname();
    const sends: Promise<AlertResult>[] = [];
    if (alert.rpc && alert.recipient) {
      sends.push(
        sendAlert(alert as MessageAlertConfig, `[vigil guardian on ${host}] ${a.message}`).then((r) => ({
          channel: 'message' as const,
          ...r,
        })),
      );
    }
    const hook = alert.webhook;
    if (hook) {
      const body = webhookAlert({ service: 'guardian', host, event: a.event, detail: a.message, output: a.output });
      sends.push(
        postJson(hook.url, body, hook.headers, hook.timeoutS * 1000).then((r) => ({
          channel: 'webhook' as const,
          ok: r.ok,
          detail: `webhook ${hook.url}: ${r.detail}`,
        })),
      );
    }
    return Promise.all(sends);
  }

  /** A dead-man's-switch ping, when configured. */
  async ping(what: PingWhat): Promise<void> {
    const url = this.config.ping;
    if (!url) return;
    const r = await sendPing(url, what, this.config.pingTimeoutS * 1000);
    if (!r.ok && !this.pingFailing) this.say(`guardian: ping ${what} to ${url} failed: ${r.detail}`);
    if (r.ok && this.pingFailing) this.say(`guardian: ping to ${url} works again`);
    this.pingFailing = !r.ok;
  }
}

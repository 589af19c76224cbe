/**
 * Telling a person without the part that broke (DESIGN.md 6b): a dead-man's-switch ping in
 * healthchecks.io's convention and a webhook alert. Their configuration keys (declared once, for
 * the guardian's and the health check's files), the URLs of a ping and the JSON of an alert.
 * Pure; the requests are sent by `httpRequest` of `@vigil/shared-types/node`.
 */
import { describeValue, strictObject, z } from './config.js';

/** Bounds of a ping and of a webhook alert (the whole of it, retries included), by default. */
export const NOTIFY_DEFAULTS = { pingTimeoutS: 10, webhookTimeoutS: 10, attempts: 3 } as const;

/** An http:// or https:// URL. */
export const httpUrlSchema = z.string().superRefine((text, ctx) => {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${describeValue(text)}` });
    return;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    ctx.addIssue({ code: 'custom', message: `expected an http:// or https:// URL, got ${describeValue(text)}` });
  }
});

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** `alert.webhook`: where a JSON alert is POSTed, with optional headers (e.g. Authorization). */
export const webhookSchema = strictObject({
  url: httpUrlSchema,
  headers: z
    .record(z.string(), z.string())
    .default({})
    .superRefine((headers, ctx) => {
      for (const [name, value] of Object.entries(headers)) {
        if (!HEADER_NAME.test(name)) ctx.addIssue({ code: 'custom', path: [name], message: 'not a header name' });
        else if (/[\r\n\0]/.test(value))
          ctx.addIssue({ code: 'custom', path: [name], message: 'a header value cannot hold a line break' });
      }
    }),
  /** The most the alert may take, retries included. */
  timeoutS: z.number().min(0.001).default(NOTIFY_DEFAULTS.webhookTimeoutS),
});

export type WebhookConfig = z.output<typeof webhookSchema>;

/** A dead-man's-switch ping: its URL as written, or a failure status code / `start`. */
export type PingWhat = 'start' | 'fail' | number;

/**
 * The URL a ping goes to, as healthchecks.io reads it: `URL/start` when a run starts, `URL` on
 * exit 0, `URL/<exit code>` otherwise, `URL/fail` for a failure without a code. A query string
 * stays at the end.
 */
export function pingUrl(base: string, what: PingWhat): string {
  if (what === 0) return base;
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/${what}`;
  return url.toString();
}

/** The JSON a webhook receives. `text` makes it readable as is by Slack- and Mattermost-style hooks. */
export interface WebhookAlert {
  readonly source: 'vigil';
  /** The program that alerts: `guardian` or `health-check`. */
  readonly service: string;
  readonly host: string;
  /** What happened: the guardian's alerting reason (`rate_limit`, …), `manual_intervention`, `resolved`. */
  readonly event: string;
  /** One line for a person. */
  readonly detail: string;
  /** The last check's output: the health report, or the guardian's last probe. */
  readonly output: unknown;
  /** Unix seconds with a fraction, and the same time in ISO 8601. */
  readonly ts: number;
  readonly time: string;
  readonly text: string;
}

export function webhookAlert(a: {
  service: string;
  host: string;
  event: string;
  detail: string;
  output: unknown;
  now?: number;
}): WebhookAlert {
  const now = a.now ?? Date.now();
  return {
    source: 'vigil',
    service: a.service,
    host: a.host,
    event: a.event,
    detail: a.detail,
    output: a.output ?? null,
    ts: now / 1000,
    time: new Date(now).toISOString(),
    text: `[vigil ${a.service} on ${a.host}] ${a.event}: ${a.detail}`,
  };
}

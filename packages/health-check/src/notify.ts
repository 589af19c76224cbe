/**
 * Telling a person without the daemon: the dead-man's-switch pings (`--ping` or `ping`:
 * `URL/start` when a run starts, then `URL` on exit 0 or `URL/<code>`) and the webhook alert
 * (`alert.webhook`) on exit 2, once per episode, with `resolved` when a later run ends 0 or 1.
 * The episode lives in a small file beside the health log, so that a run every 5 minutes does
 * not alert every 5 minutes; an alert that could not be delivered is tried again by the next run.
 * Nothing here throws: each outcome is a note for the report and, unless quiet, for stderr.
 */
import { hostname } from 'node:os';
import {
  besideFile,
  HealthExit,
  type HealthReport,
  type PingWhat,
  pingUrl,
  type WebhookConfig,
  webhookAlert,
} from '@vigil/shared-types';
import { postJson, readTextOrNull, removeFile, sendPing, writeFileAtomic } from '@vigil/shared-types/node';

/** One ping or alert and how it went (what the report's `notifications` lists). */
export interface Note {
  readonly what: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** The episode file's name, beside the health log. */
export const ALERT_STATE_NAME = 'health-alert.json';

interface Episode {
  /** Unix seconds of the first run of the episode that exited 2. */
  since: number;
  /** Whether its alert was delivered. */
  sent: boolean;
}

/** The dead-man's-switch pings of one run. */
export class Pinger {
  readonly notes: Note[] = [];

  constructor(
    private readonly url: string | undefined,
    private readonly timeoutS: number,
  ) {}

  async ping(what: PingWhat): Promise<void> {
    if (!this.url) return;
    const r = await sendPing(this.url, what, this.timeoutS * 1000);
    let url = this.url;
    try {
      url = pingUrl(this.url, what);
    } catch {
      // not a URL: the outcome says so
    }
    this.notes.push({ what: `ping ${what}`, ok: r.ok, detail: `${url}: ${r.detail}` });
  }
}

function readEpisode(file: string): Episode | null {
  const text = readTextOrNull(file);
  if (text === null) return null;
  try {
    const v = JSON.parse(text) as Partial<Episode>;
    if (typeof v.since === 'number' && typeof v.sent === 'boolean') return { since: v.since, sent: v.sent };
  } catch {
    // a damaged file: the episode starts again (an alert too many rather than one too few)
  }
  return null;
}

/** Why a person is needed, in one line: the failed checks and what they found. */
function failedDetail(report: HealthReport): string {
  const failed = report.checks.filter((c) => c.status === 'failed');
  return `manual intervention required: ${failed.map((c) => `${c.name} failed: ${c.detail}`).join('; ')}`;
}

/**
 * The webhook's part of a finished run (under the run's lock): an alert at the start of an
 * episode of exit 2 (again until delivered), `resolved` at its end.
 */
export async function alertOnReport(
  webhook: WebhookConfig | undefined,
  healthLog: string,
  report: HealthReport,
): Promise<Note[]> {
  if (!webhook) return [];
  const file = besideFile(healthLog, ALERT_STATE_NAME);
  const episode = readEpisode(file);
  const post = async (event: string, detail: string): Promise<Note> => {
    const body = webhookAlert({ service: 'health-check', host: hostname(), event, detail, output: report });
    const r = await postJson(webhook.url, body, webhook.headers, webhook.timeoutS * 1000);
    return { what: `webhook ${event}`, ok: r.ok, detail: `${webhook.url}: ${r.detail}` };
  };
  if (report.exitCode === HealthExit.MANUAL) {
    const e = episode ?? { since: report.ts, sent: false };
    if (e.sent) return [];
    const note = await post('manual_intervention', failedDetail(report));
    writeFileAtomic(file, `${JSON.stringify({ since: e.since, sent: note.ok })}\n`);
    return [note];
  }
  if (episode === null) return [];
  removeFile(file);
  if (!episode.sent) return [];
  const since = new Date(episode.since * 1000).toISOString();
  const how = report.exitCode === HealthExit.HEALED ? 'healed' : 'healthy';
  return [await post('resolved', `${how} again (exit ${report.exitCode}); a person was needed since ${since}`)];
}

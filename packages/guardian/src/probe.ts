/**
 * The probes, over HTTP with got: the liveness chat completion (spec 2.4: max_tokens 2,
 * temperature 0; success when the reply contains "content"), the model list and the canary chat.
 * Each is bounded by the probe budget, never retried, on a fresh connection (a kept-alive socket
 * to a process since restarted would fail for the wrong reason), and classified into a root
 * cause when it fails.
 */
import { Agent } from 'node:http';
import { formatHostPort, type HostPort, INFERENCE_PATHS, isProbeSuccess, probeRequest } from '@vigil/shared-types';
import got, { type Got, RequestError } from 'got';
import type { ProbeKind, RootCause } from './machine.js';

export interface ProbeTarget {
  readonly http: HostPort;
  readonly model: string;
}

export interface ProbeSettings {
  readonly budgetMs: number;
  readonly prompt: string;
  readonly canaryPrompt: string;
  readonly canaryMaxTokens: number;
}

export interface ProbeResult {
  readonly ok: boolean;
  /** Milliseconds from the request to the end of the reply (or the failure). */
  readonly ms: number;
  readonly cause?: RootCause;
  /** An excerpt of what came back (or of the error), for the log. */
  readonly snippet?: string;
  /** When the probe started and ended (Unix seconds): its own line in an access log is not "busy". */
  readonly startedAt: number;
  readonly endedAt: number;
}

const SNIPPET_CHARS = 200;

/** At most SNIPPET_CHARS characters of text, on one line. */
export function excerpt(text: string): string {
  const one = text.replace(/\s+/g, ' ').trim();
  return one.length > SNIPPET_CHARS ? `${one.slice(0, SNIPPET_CHARS - 1)}…` : one;
}

/** The root cause of a request that got no reply. */
export function classifyError(err: unknown): RootCause {
  const code = (err as { code?: string }).code ?? '';
  if ((err as Error).name === 'TimeoutError' || code === 'ETIMEDOUT') return 'timeout';
  if (code === 'ECONNREFUSED') return 'refused';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'reset';
  return 'network';
}

/** Judges a reply: the root cause of a failure, or null when the probe succeeded. */
export function judgeReply(kind: ProbeKind, status: number, body: string): RootCause | null {
  if (status < 200 || status > 299) return 'http_error';
  if (body.trim() === '') return 'empty_reply';
  if (kind === 'chat') return isProbeSuccess(body) ? null : 'no_content';
  if (kind === 'models') {
    try {
      const list = JSON.parse(body) as { data?: unknown };
      return Array.isArray(list.data) ? null : 'no_content';
    } catch {
      return 'no_content';
    }
  }
  // The canary wants real text back, not only the key.
  try {
    const reply = JSON.parse(body) as { choices?: { message?: { content?: unknown } }[] };
    const content = reply.choices?.[0]?.message?.content;
    return typeof content === 'string' && content.trim() !== '' ? null : 'no_content';
  } catch {
    return 'no_content';
  }
}

export class Prober {
  private readonly client: Got;
  private readonly agent = new Agent({ keepAlive: false, maxSockets: 4 });

  constructor(private readonly settings: ProbeSettings) {
    this.client = got.extend({
      retry: { limit: 0 },
      throwHttpErrors: false,
      followRedirect: false,
      responseType: 'text',
      agent: { http: this.agent },
      headers: { 'user-agent': 'vigil-guardian' },
    });
  }

  /** Runs one probe against `target`; never throws. `signal` aborts it (shutdown). */
  async probe(kind: ProbeKind, target: ProbeTarget, signal?: AbortSignal): Promise<ProbeResult> {
    const base = `http://${formatHostPort(target.http)}`;
    const startedAt = Date.now() / 1000;
    const t0 = performance.now();
    const finish = (r: { ok: boolean; cause?: RootCause; snippet?: string }): ProbeResult => ({
      ...r,
      ms: performance.now() - t0,
      startedAt,
      endedAt: Date.now() / 1000,
    });
    try {
      const options = { timeout: { request: this.settings.budgetMs }, ...(signal ? { signal } : {}) };
      const res =
        kind === 'models'
          ? await this.client.get(`${base}${INFERENCE_PATHS.models}`, options)
          : await this.client.post(`${base}${INFERENCE_PATHS.chatCompletions}`, {
              ...options,
              json:
                kind === 'chat'
                  ? probeRequest(target.model, this.settings.prompt)
                  : {
                      model: target.model,
                      messages: [{ role: 'user', content: this.settings.canaryPrompt }],
                      max_tokens: this.settings.canaryMaxTokens,
                      temperature: 0,
                    },
            });
      const body = res.body;
      const cause = judgeReply(kind, res.statusCode, body);
      if (cause === null) return finish({ ok: true });
      const snippet =
        cause === 'http_error'
          ? `HTTP ${res.statusCode}: ${excerpt(body)}`.trim()
          : cause === 'empty_reply'
            ? `HTTP ${res.statusCode} with an empty body`
            : excerpt(body);
      return finish({ ok: false, cause, snippet });
    } catch (err) {
      const cause = classifyError(err);
      const budgetS = this.settings.budgetMs / 1000;
      const message =
        cause === 'timeout'
          ? `no complete reply within the ${budgetS} s budget`
          : err instanceof RequestError
            ? `${err.code}: ${err.message}`
            : String(err);
      return finish({ ok: false, cause, snippet: excerpt(message) });
    }
  }

  close(): void {
    this.agent.destroy();
  }
}

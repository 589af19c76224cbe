/**
 * The probes, over HTTP with got: the liveness chat completion (spec 2.4: max_tokens 2,
 * temperature 0; success when the reply contains "content"), the model list and the canary chat.
 * Each is bounded by the probe budget, never retried, on a fresh connection (a kept-alive socket
 * to a process since restarted would fail for the wrong reason), and classified into a root
 * cause when it fails.
 */
import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import {
  formatHostPort,
  type HostPort,
  INFERENCE_PATHS,
  isProbeSuccess,
  probeRequest,
  terminalSafe,
} from '@vigil/shared-types';
import got, { type Got, RequestError } from 'got';
import type { BusyAnswer, ProbeKind, RootCause } from './machine.js';

/** Mutual TLS: the server's mTLS listener, the client certificate and key, the CA of the server. */
export interface MtlsTarget {
  readonly address: HostPort;
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
  readonly servername?: string | undefined;
}

export interface ProbeTarget {
  readonly http: HostPort;
  /** When set, probes go here over mutual TLS instead of to `http`. */
  readonly mtls?: MtlsTarget | undefined;
  readonly model: string;
  /** The server's API key file (first line): sent as `Authorization: Bearer` on plain HTTP. */
  readonly apiKeyFile?: string | undefined;
}

export interface ProbeSettings {
  readonly budgetMs: number;
  readonly prompt: string;
  readonly canaryPrompt: string;
  readonly canaryMaxTokens: number;
  /** The busy check's limit: a server that does not report its progress within it is "not answering". */
  readonly busyCheckMs?: number;
}

export interface ProbeResult {
  readonly ok: boolean;
  /** Milliseconds from the request to the end of the reply (or the failure). */
  readonly ms: number;
  readonly cause?: RootCause;
  /** An excerpt of what came back (or of the error), for the log. */
  readonly snippet?: string;
  /** The busy check's answer (kind 'busy' only). */
  readonly busy?: BusyAnswer;
  /** When the probe started and ended (Unix seconds): its own line in an access log is not "busy". */
  readonly startedAt: number;
  readonly endedAt: number;
}

const SNIPPET_CHARS = 200;

/** At most SNIPPET_CHARS characters of text, on one line, control characters escaped (terminalSafe). */
export function excerpt(text: string): string {
  const one = terminalSafe(text.replace(/\s+/g, ' ').trim());
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

/**
 * The busy check's reading of a /health reply (issue 30): whether the server has work in flight
 * and makes progress on it. Pure.
 */
export function busyAnswer(status: number, body: string): BusyAnswer {
  let reply: { status?: unknown; progress?: { in_flight?: unknown; stalled?: unknown } } = {};
  try {
    const parsed = JSON.parse(body) as unknown;
    if (parsed && typeof parsed === 'object') reply = parsed as typeof reply;
  } catch {
    // not JSON: a server that does not report progress
  }
  if (status === 503) return reply.status === 'stalled' ? 'stalled' : 'not_serving';
  const p = reply.progress;
  if (status !== 200 || !p || typeof p.in_flight !== 'number') return 'unreported';
  if (typeof p.stalled === 'number' && p.stalled > 0) return 'stalled';
  return p.in_flight > 0 ? 'progressing' : 'idle';
}

/** Judges a reply: the root cause of a failure, or null when the probe succeeded. */
export function judgeReply(kind: ProbeKind, status: number, body: string): RootCause | null {
  if (status === 503 && body.includes('model_loading')) return 'loading';
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
  private readonly httpsAgent = new HttpsAgent({ keepAlive: false, maxSockets: 4 });

  constructor(private readonly settings: ProbeSettings) {
    this.client = got.extend({
      retry: { limit: 0 },
      throwHttpErrors: false,
      followRedirect: false,
      responseType: 'text',
      agent: { http: this.agent, https: this.httpsAgent },
      headers: { 'user-agent': 'vigil-guardian' },
    });
  }

  /** Runs one probe against `target`; never throws. `signal` aborts it (shutdown). */
  async probe(kind: ProbeKind, target: ProbeTarget, signal?: AbortSignal): Promise<ProbeResult> {
    const base = target.mtls
      ? `https://${formatHostPort(target.mtls.address)}`
      : `http://${formatHostPort(target.http)}`;
    const startedAt = Date.now() / 1000;
    const t0 = performance.now();
    const finish = (r: { ok: boolean; cause?: RootCause; snippet?: string; busy?: BusyAnswer }): ProbeResult => ({
      ...r,
      ms: performance.now() - t0,
      startedAt,
      endedAt: Date.now() / 1000,
    });
    try {
      const budgetMs =
        kind === 'busy' ? Math.min(this.settings.budgetMs, this.settings.busyCheckMs ?? 3000) : this.settings.budgetMs;
      const options = {
        timeout: { request: budgetMs },
        ...(signal ? { signal } : {}),
        ...(target.mtls ? { https: tlsOptions(target.mtls) } : {}),
        // Read at each probe, as the certificates: a rotated key is picked up without a restart.
        ...(!target.mtls && target.apiKeyFile
          ? { headers: { authorization: `Bearer ${readFileSync(target.apiKeyFile, 'utf8').split('\n')[0]!.trim()}` } }
          : {}),
      };
      if (kind === 'busy') {
        // Its progress, from /health (no key needed); any reply is an answer.
        const res = await this.client.get(`${base}${INFERENCE_PATHS.health}`, options);
        return finish({ ok: true, busy: busyAnswer(res.statusCode, res.body) });
      }
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
      const budgetS = (kind === 'busy' ? (this.settings.busyCheckMs ?? 3000) : this.settings.budgetMs) / 1000;
      const message =
        cause === 'timeout'
          ? `no complete reply within the ${budgetS} s budget`
          : err instanceof RequestError
            ? `${err.code}: ${err.message}`
            : String(err);
      return finish({ ok: false, cause, snippet: excerpt(message) });
    }
  }

  /**
   * Probes `target` with the chat probe until one succeeds or `graceMs` has passed (a backend
   * just started is loading): a pause of 250 ms doubling to at most 2 s between attempts.
   */
  async awaitServing(
    target: ProbeTarget,
    graceMs: number,
    signal?: AbortSignal,
  ): Promise<{ ok: boolean; ms: number; last: ProbeResult | null; attempts: number }> {
    const t0 = performance.now();
    let pause = 250;
    let last: ProbeResult | null = null;
    let attempts = 0;
    for (;;) {
      last = await this.probe('chat', target, signal);
      attempts += 1;
      const ms = performance.now() - t0;
      if (last.ok) return { ok: true, ms, last, attempts };
      if (ms + pause >= graceMs || signal?.aborted) return { ok: false, ms, last, attempts };
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(2000, pause * 2);
    }
  }

  close(): void {
    this.agent.destroy();
    this.httpsAgent.destroy();
  }
}

/** got's TLS options for a mutual-TLS probe; the files are read each time (certificates get renewed). */
function tlsOptions(m: MtlsTarget) {
  return {
    key: readFileSync(m.key),
    certificate: readFileSync(m.cert),
    certificateAuthority: readFileSync(m.ca),
    ...(m.servername ? { servername: m.servername } : {}),
  };
}

/**
 * The probes, with the inference server's client of shared-types: the liveness chat completion (spec 2.4: max_tokens 2,
 * temperature 0; success when the reply contains "content"), the model list and the canary chat.
 * Each is bounded by the probe budget, never retried, on a fresh connection (a kept-alive socket
 * to a process since restarted would fail for the wrong reason), and classified into a root
 * cause when it fails.
 */
import { readFileSync } from 'node:fs';
import { type HostPort, INFERENCE_PATHS, isProbeSuccess } from '@vigil/shared-types';
import { type HttpReply, InferenceClient, replySnippet, type WireError } from '@vigil/shared-types/node';
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

/** The most of a probe's answer read (a probe's answer is a few hundred bytes). */
const PROBE_ANSWER_BYTES = 1 << 20;

export interface ProbeResult {
  readonly ok: boolean;
  /** Milliseconds from the request to the end of the reply (or the failure). */
  readonly ms: number;
  readonly cause?: RootCause;
  /** An excerpt of what came back (or of the error), for the log. */
  readonly snippet?: string;
  /** The busy check's answer (kind 'busy' only). */
  readonly busy?: BusyAnswer;
  /**
   * A chat or canary probe that timed out, after which the server's /health said its model waits
   * for CPUs that other processes hold (`progress.waiting_for_cpu`, `--worker-sched idle`).
   */
  readonly waitingCpu?: boolean;
  /** When the probe started and ended (Unix seconds): its own line in an access log is not "busy". */
  readonly startedAt: number;
  readonly endedAt: number;
}

/** At most 200 characters of text, on one line, control characters escaped (terminalSafe). */
export const excerpt = replySnippet;

/** The root cause of a request that got no reply (a WireError's kind). */
export function classifyError(err: unknown): RootCause {
  const kind = (err as Partial<WireError>).kind;
  return kind === 'timeout' || kind === 'refused' || kind === 'reset' ? kind : 'network';
}

/**
 * What a /health reply says (issue 30), read once: the busy check's answer (whether the server has
 * work in flight and makes progress on it) and whether its model waits for CPUs other processes
 * hold (only a 200 says so). Pure.
 */
export function readHealth(status: number, body: string): { busy: BusyAnswer; waitingForCpu: boolean } {
  let reply: {
    status?: unknown;
    progress?: { in_flight?: unknown; stalled?: unknown; waiting_for_cpu?: unknown };
  } = {};
  try {
    const parsed = JSON.parse(body) as unknown;
    if (parsed && typeof parsed === 'object') reply = parsed as typeof reply;
  } catch {
    // not JSON: a server that does not report progress
  }
  const p = reply.progress;
  const waitingForCpu = status === 200 && p?.waiting_for_cpu === true;
  let busy: BusyAnswer;
  if (status === 503) busy = reply.status === 'stalled' ? 'stalled' : 'not_serving';
  else if (status !== 200 || !p || typeof p.in_flight !== 'number') busy = 'unreported';
  else if (typeof p.stalled === 'number' && p.stalled > 0) busy = 'stalled';
  else busy = p.in_flight > 0 ? 'progressing' : 'idle';
  return { busy, waitingForCpu };
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
  constructor(private readonly settings: ProbeSettings) {}

  /** The client of `target`: mutual TLS, or plain HTTP with the key file read at each request. */
  private clientOf(target: ProbeTarget, budgetMs: number): InferenceClient {
    const m = target.mtls;
    const keyFile = target.apiKeyFile;
    return new InferenceClient(
      m
        ? { address: m.address, tls: { cert: m.cert, key: m.key, ca: m.ca, servername: m.servername } }
        : {
            address: target.http,
            // Read at each probe, as the certificates: a rotated key is picked up without a restart.
            ...(keyFile ? { apiKey: () => readFileSync(keyFile, 'utf8').split('\n')[0]!.trim() } : {}),
          },
      { timeoutMs: budgetMs, maxBytes: PROBE_ANSWER_BYTES, userAgent: 'vigil-guardian' },
    );
  }

  /** Runs one probe against `target`; never throws. `signal` aborts it (shutdown). */
  async probe(kind: ProbeKind, target: ProbeTarget, signal?: AbortSignal): Promise<ProbeResult> {
    const startedAt = Date.now() / 1000;
    const t0 = performance.now();
    const finish = (r: Omit<ProbeResult, 'ms' | 'startedAt' | 'endedAt'>): ProbeResult => ({
      ...r,
      ms: performance.now() - t0,
      startedAt,
      endedAt: Date.now() / 1000,
    });
    const budgetMs =
      kind === 'busy' ? Math.min(this.settings.budgetMs, this.settings.busyCheckMs ?? 3000) : this.settings.budgetMs;
    const client = this.clientOf(target, budgetMs);
    try {
      if (kind === 'busy') {
        // Its progress, from /health (no key needed); any reply is an answer.
        const res = await client.health({ signal });
        return finish({ ok: true, busy: readHealth(res.status, res.text).busy });
      }
      const res = await this.ask(client, kind, target.model, signal);
      const cause = judgeReply(kind, res.status, res.text);
      if (cause === null) return finish({ ok: true });
      const snippet =
        cause === 'http_error'
          ? `HTTP ${res.status}: ${excerpt(res.text)}`.trim()
          : cause === 'empty_reply'
            ? `HTTP ${res.status} with an empty body`
            : excerpt(res.text);
      return finish({ ok: false, cause, snippet });
    } catch (err) {
      const cause = classifyError(err);
      const message =
        cause === 'timeout' ? `no complete reply within the ${budgetMs / 1000} s budget` : (err as Error).message;
      const waitingCpu = cause === 'timeout' && kind !== 'models' && (await this.waitingForCpu(target, signal));
      return finish({ ok: false, cause, snippet: excerpt(message), ...(waitingCpu ? { waitingCpu } : {}) });
    }
  }

  /** After a completion timed out: does the server say its model waits for CPUs others hold? */
  private async waitingForCpu(target: ProbeTarget, signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return false;
    try {
      const res = await this.clientOf(target, this.settings.busyCheckMs ?? 3000).health({ signal });
      return readHealth(res.status, res.text).waitingForCpu;
    } catch {
      return false; // no answer: not a server that waits, one that does not reply
    }
  }

  /** The request of a probe kind: the model list, the liveness probe (spec 2.4) or the canary. */
  private ask(client: InferenceClient, kind: ProbeKind, model: string, signal?: AbortSignal): Promise<HttpReply> {
    if (kind === 'models') return client.request({ path: INFERENCE_PATHS.models, signal });
    if (kind === 'chat') return client.probe(model, this.settings.prompt, { signal });
    return client.chat(
      {
        model,
        messages: [{ role: 'user', content: this.settings.canaryPrompt }],
        max_tokens: this.settings.canaryMaxTokens,
        temperature: 0,
      },
      { signal },
    );
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

  /** Nothing to end: every probe has its own connection, closed after it. */
  close(): void {}
}

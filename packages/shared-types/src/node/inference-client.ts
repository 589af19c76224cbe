/**
 * The inference server's client (DESIGN.md 4), on vigil's one HTTP client (`Wire`): the model
 * list, chat completions and the guardian's completion probe (spec 2.4), `/health` with its progress
 * report, `/metrics`. Plain HTTP with an optional API key (Bearer, read at each request so that a
 * rotated key is picked up), or mutual TLS (`tls`: files read at each request).
 * `request`, `chat` and `probe` give the whole reply, of any status: the guardian judges it.
 */
import type { ChatCompletionRequest, ModelList } from '../inference.js';
import { probeRequest } from '../inference.js';
import { INFERENCE_PATHS } from '../net.js';
import {
  type CallOptions,
  type HttpReply,
  replyJson,
  type TlsFiles,
  unexpectedStatus,
  Wire,
  type WireEndpoint,
  WireError,
  type WireLimits,
  type WireRequest,
} from './wire-http.js';

export interface InferenceEndpoint extends WireEndpoint {
  /** Mutual TLS (the server's :1338 listener) instead of plain HTTP. */
  readonly tls?: TlsFiles | undefined;
  /** The API key, or a function read at each request (a key file); sent as `Authorization: Bearer` on plain HTTP. */
  readonly apiKey?: string | (() => string) | undefined;
}

/** What `/health` says: `ok`, `loading`, `stalled`, …; `progress` when the model is loaded. */
export interface InferenceHealth {
  readonly status: string;
  readonly reason?: string;
  readonly progress?: {
    readonly in_flight: number;
    readonly oldest_age_s: number;
    readonly since_progress_s: number | null;
    readonly stalled: number;
    readonly reason: string | null;
    /** The model's SCHED_IDLE threads wait for CPUs other processes hold (not a stall). */
    readonly waiting_for_cpu?: boolean;
  };
}

export class InferenceClient {
  readonly wire: Wire;

  constructor(
    private readonly endpoint: InferenceEndpoint,
    limits: WireLimits = {},
  ) {
    this.wire = new Wire({ address: endpoint.address, https: endpoint.https, tls: endpoint.tls }, limits);
  }

  /** `http://HOST:PORT` or `https://HOST:PORT` (mutual TLS). */
  get origin(): string {
    return this.wire.origin;
  }

  /** The key's header, when one is configured and the listener is plain HTTP (a WireError when the key cannot be read). */
  private auth(): Record<string, string> {
    const key = this.endpoint.tls ? undefined : this.endpoint.apiKey;
    if (key === undefined) return {};
    try {
      return { authorization: `Bearer ${typeof key === 'function' ? key() : key}` };
    } catch (err) {
      throw new WireError('network', `cannot read the API key: ${(err as Error).message}`, { cause: err });
    }
  }

  /** One request, with the key; any status. */
  async request(r: WireRequest): Promise<HttpReply> {
    return this.wire.request({ ...r, headers: { ...this.auth(), ...r.headers } });
  }

  /** GET /v1/models: the list (HTTP 200 with `data`), else a WireError. */
  async models(o: CallOptions = {}): Promise<ModelList> {
    const reply = await this.request({ path: INFERENCE_PATHS.models, ...o });
    if (reply.status !== 200) throw unexpectedStatus(reply, INFERENCE_PATHS.models);
    const list = replyJson<ModelList>(reply, 'the model list');
    if (!Array.isArray(list?.data)) throw new WireError('bad_reply', 'the model list has no data');
    return list;
  }

  /** POST /v1/chat/completions with `body`: the reply, of any status. */
  chat(body: ChatCompletionRequest | Record<string, unknown>, o: CallOptions = {}): Promise<HttpReply> {
    return this.request({ method: 'POST', path: INFERENCE_PATHS.chatCompletions, body, ...o });
  }

  /** The liveness probe (spec 2.4: max_tokens 2, temperature 0); it passed when `isProbeSuccess(reply.text)`. */
  probe(model: string, prompt = 'ping', o: CallOptions = {}): Promise<HttpReply> {
    return this.chat(probeRequest(model, prompt), o);
  }

  /** GET /health: its status (200 serving, 503 not) and what it says (null when it is not JSON). */
  async health(o: CallOptions = {}): Promise<{ status: number; health: InferenceHealth | null; text: string }> {
    const reply = await this.request({ path: INFERENCE_PATHS.health, ...o });
    let health: InferenceHealth | null = null;
    try {
      const parsed = JSON.parse(reply.text) as unknown;
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) health = parsed as InferenceHealth;
    } catch {
      // not JSON: a server that does not report its health this way
    }
    return { status: reply.status, health, text: reply.text };
  }

  /** GET /metrics: the Prometheus text (HTTP 200), else a WireError. */
  async metrics(o: CallOptions = {}): Promise<string> {
    return this.wire.metrics({ ...o, headers: this.auth() });
  }

  /** Ends kept connections (keep-alive). */
  close(): void {
    this.wire.close();
  }
}

/** A client of the inference server at `endpoint` (limits: see WireLimits). */
export function inferenceClient(endpoint: InferenceEndpoint, limits: WireLimits = {}): InferenceClient {
  return new InferenceClient(endpoint, limits);
}

/**
 * The liveness probe of vigil's containers, and the restart requests the guardian makes.
 *
 *   vigil liveness probe --kind chat --url http://127.0.0.1:1337 --model tiny
 *        [--request-timeout 75] [--kill-after 2] [--pid 1] [--state FILE] [--restart-request FILE]
 *   vigil liveness probe --kind rpc --url http://127.0.0.1:8080 [same options]
 *   vigil liveness request-restart FILE
 *
 * probe: one real request. `chat` is the inference probe of spec 8: a chat completion of at most
 * 2 tokens at temperature 0 that must answer 200 with "content" within --request-timeout
 * seconds; a full queue (429) or a model still loading (503 model_loading) is a server that
 * answers, so it passes. `rpc` is the messaging daemon's JSON-RPC `version` over HTTP.
 * Docker does not act on an unhealthy container (only on one that exits), so the probe acts
 * itself: after --kill-after consecutive failures (counted in --state, which lives in the
 * container's /tmp) it sends SIGTERM to --pid (1: the container's init, which passes it to the
 * service; the service's shutdown is bounded) and the restart policy starts the container again.
 * A restart request file (written by `request-restart`, i.e. by the guardian) is honoured the
 * same way at the next probe, and removed first. Exit 0: healthy; 1: not (the line printed says
 * why; Docker keeps it in `docker inspect`); 78: bad usage.
 *
 * request-restart: writes FILE (atomically) and exits 0; the guardian's `command` service
 * manager runs it as its restart action, since inside compose it has no other way to restart a
 * container (no Docker socket is given to it). Its directory must exist (the shared volume).
 */
import { basename, dirname } from 'node:path';
import {
  ConfigError,
  DAEMON_PATHS,
  daemonClient,
  endpointOfUrl,
  fileExists,
  INFERENCE_PATHS,
  inferenceClient,
  isProbeSuccess,
  readTextOrNull,
  removeFile,
  type WireError,
  writeFileAtomic,
} from '@vigil/shared-types/light';
import { Command } from 'commander';
import { WriteError } from '../errors.js';

export type ProbeKind = 'chat' | 'rpc';

export interface ProbeOptions {
  readonly kind: ProbeKind;
  readonly url: string;
  readonly model?: string | undefined;
  readonly requestTimeoutS: number;
  /** Failures in a row that end the service; 0: never. */
  readonly killAfter: number;
  readonly pid: number;
  readonly state: string;
  readonly restartRequest?: string | undefined;
}

export interface ProbeResult {
  readonly ok: boolean;
  /** The line printed: why it passed or failed, and what was done about it. */
  readonly line: string;
}

const HINT = 'run vigil liveness --help for the usage';

/** Checks the probe's flags as commander hands them over. */
export function probeOptions(raw: Record<string, string | undefined>): ProbeOptions {
  const kind = raw.kind;
  if (kind !== 'chat' && kind !== 'rpc') throw new ConfigError('--kind must be chat or rpc', { hint: HINT });
  if (!raw.url) throw new ConfigError('--url is required', { hint: HINT });
  if (kind === 'chat' && !raw.model) throw new ConfigError('--model is required with --kind chat', { hint: HINT });
  const requestTimeoutS = Number(raw.requestTimeout ?? (kind === 'chat' ? 75 : 5));
  const killAfter = Number(raw.killAfter ?? 0);
  const pid = Number(raw.pid ?? 1);
  if (!(requestTimeoutS > 0) || !Number.isInteger(killAfter) || killAfter < 0 || !Number.isInteger(pid) || pid < 1) {
    throw new ConfigError('--request-timeout must be positive, --kill-after and --pid non-negative integers', {
      hint: HINT,
    });
  }
  return {
    kind,
    url: raw.url,
    model: raw.model,
    requestTimeoutS,
    killAfter,
    pid,
    state: raw.state ?? `/tmp/vigil-liveness-${kind}.json`,
    restartRequest: raw.restartRequest,
  };
}

function readCount(file: string): number {
  try {
    const n = (JSON.parse(readTextOrNull(file) ?? '{}') as { failures?: unknown }).failures;
    return Number.isInteger(n) && (n as number) >= 0 ? (n as number) : 0;
  } catch {
    return 0;
  }
}

const writeCount = (file: string, failures: number) => writeFileAtomic(file, JSON.stringify({ failures }));

/** One request: the chat completion or the JSON-RPC `version`, with the clients of shared-types. */
async function request(o: ProbeOptions): Promise<{ ok: boolean; detail: string }> {
  const started = performance.now();
  const timeoutMs = o.requestTimeoutS * 1000;
  const path = o.kind === 'chat' ? INFERENCE_PATHS.chatCompletions : DAEMON_PATHS.rpc;
  const ms = () => Math.round(performance.now() - started);
  const where = endpointOfUrl(o.url);
  if (!where) return { ok: false, detail: `not an http(s) URL: ${o.url}` };
  const limits = { timeoutMs, maxBytes: 1 << 20, userAgent: 'vigil-liveness' };
  try {
    if (o.kind === 'rpc') {
      if (where.endpoint.https) return { ok: false, detail: `${path}: the daemon speaks plain http (${o.url})` };
      const r = await daemonClient(where.endpoint.address, limits).rpc<{ version?: unknown } | null>('version');
      if (typeof r?.version === 'string') return { ok: true, detail: `version ${r.version} in ${ms()} ms` };
      return { ok: false, detail: `${path}: the reply has no result.version (${ms()} ms)` };
    }
    const res = await inferenceClient(where.endpoint, limits).probe(o.model!);
    if (res.status === 200 && isProbeSuccess(res.text)) return { ok: true, detail: `completion in ${ms()} ms` };
    if (res.status === 429) return { ok: true, detail: `busy: queue full (429) in ${ms()} ms` };
    if (res.status === 503 && res.text.includes('model_loading')) return { ok: true, detail: 'model loading (503)' };
    return {
      ok: false,
      detail: `${path}: HTTP ${res.status} ${res.text.replace(/\s+/g, ' ').slice(0, 160)} (${ms()} ms)`,
    };
  } catch (err) {
    const why =
      (err as WireError).kind === 'timeout' ? `no answer within ${timeoutMs / 1000} s` : (err as Error).message;
    return { ok: false, detail: `${path}: ${why} (${ms()} ms)` };
  }
}

function terminate(pid: number, why: string): string {
  try {
    process.kill(pid, 'SIGTERM');
    return `${why}: sent SIGTERM to pid ${pid}`;
  } catch (err) {
    return `${why}: could not signal pid ${pid}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
  }
}

/** The probe: a pending restart request first, then one request, then the failure count. */
export async function probe(o: ProbeOptions): Promise<ProbeResult> {
  if (o.restartRequest) {
    const requested = readTextOrNull(o.restartRequest);
    if (requested !== null) {
      removeFile(o.restartRequest);
      writeCount(o.state, 0);
      const why = `restart requested (${basename(o.restartRequest)}: ${requested.trim()})`;
      return { ok: false, line: terminate(o.pid, why) };
    }
  }
  const r = await request(o);
  if (r.ok) {
    writeCount(o.state, 0);
    return { ok: true, line: `ok: ${r.detail}` };
  }
  const failures = readCount(o.state) + 1;
  if (o.killAfter > 0 && failures >= o.killAfter) {
    writeCount(o.state, 0);
    return { ok: false, line: terminate(o.pid, `failed ${failures} times in a row, last: ${r.detail}`) };
  }
  writeCount(o.state, failures);
  return { ok: false, line: `failed (${failures}${o.killAfter > 0 ? ` of ${o.killAfter}` : ''}): ${r.detail}` };
}

/** Writes a restart request for the probe to carry out. Its directory must exist. */
export function requestRestart(file: string): void {
  if (!fileExists(dirname(file))) throw new WriteError(`cannot write ${file}: ENOENT`);
  try {
    writeFileAtomic(file, `${JSON.stringify({ requested_at: Date.now() / 1000, by: 'guardian' })}\n`);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new WriteError(`cannot write ${file}: ${code}`, err);
  }
}

/** `vigil liveness probe|request-restart`. */
export function livenessCommand(): Command {
  const probeCommand = new Command('probe')
    .description('one real request; after --kill-after failures in a row, or on a restart request, SIGTERM to --pid')
    .exitOverride()
    .option('--kind <chat|rpc>', 'chat: a 2-token chat completion; rpc: the JSON-RPC version over HTTP')
    .option('--url <url>', 'the server, e.g. http://127.0.0.1:1337')
    .option('--model <id>', 'the model asked for (--kind chat)')
    .option('--request-timeout <s>', 'seconds the request may take (default: chat 75, rpc 5)')
    .option('--kill-after <n>', 'failures in a row that end the service (default 0: never)')
    .option('--pid <pid>', 'the process to end (default 1: the container init)')
    .option('--state <file>', 'where the failures are counted (default /tmp/vigil-liveness-KIND.json)')
    .option('--restart-request <file>', 'a restart request to carry out (and remove) when present')
    .addHelpText('after', '\nexit codes: 0 healthy, 1 not (the line printed says why), 78 bad usage')
    .action(async (raw: Record<string, string | undefined>) => {
      const r = await probe(probeOptions(raw));
      process.stdout.write(`${r.line}\n`);
      if (!r.ok) process.exitCode = 1;
    });
  const requestCommand = new Command('request-restart')
    .description('write a restart request FILE that the next probe carries out (the guardian restart action)')
    .exitOverride()
    .argument('<file>', 'the request file, in a directory that exists')
    .action((file: string) => {
      requestRestart(file);
      process.stdout.write(`restart requested: ${file}\n`);
    });
  return new Command('liveness')
    .description('the liveness probe of the containers, and the guardian restart requests')
    .exitOverride()
    .addCommand(probeCommand)
    .addCommand(requestCommand);
}

/**
 * What start-up checks and opens before anything is served: the manifest (nothing is served from
 * a model that fails it), the model file's GGUF header, the TLS files, the access log, then the
 * servers (server.ts binds them through the shared lifecycle). Every failure is one clear error:
 * ConfigError (exit 78) or StartupError (exit 1).
 */
import { openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { dirname } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import { ensureDir, PRIVATE_DIR, PRIVATE_FILE } from '@vigil/shared-types/node';
import { AccessLog } from './access-log.js';
import type { ServerConfig } from './config.js';
import { ConfigError, GgufError, ManifestError, StartupError } from './errors.js';
import { checkModelSummary, readGgufSummary } from './gguf/index.js';
import type { Logger } from './logger.js';
import { verifyManifest } from './manifest.js';
import { type RefusalLog, refusalLog, watchRefusals } from './tls-refusals.js';

export interface TlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca: Buffer;
}

/** Checks the model against its manifest (when configured), logging what was verified. */
export async function checkManifest(config: ServerConfig, logger: Logger): Promise<void> {
  if (!config.manifest) return;
  try {
    const r = await verifyManifest(config.manifest, config.model, config.manifestKey);
    logger.info('manifest verified', {
      manifest: config.manifest,
      sha256: r.entry.sha256,
      signature: r.signatureChecked ? 'valid' : r.signed ? 'not checked (no --manifest-key)' : 'none',
    });
  } catch (err) {
    if (err instanceof ManifestError && err.kind === 'signature') {
      throw new StartupError('VIGIL_ERR_INFERENCE_SIGNATURE', `signature invalid: ${err.message}`);
    }
    throw new StartupError('VIGIL_ERR_INFERENCE_MANIFEST', `manifest verification failed: ${(err as Error).message}`);
  }
}

/**
 * The file's header, metadata and tensor table, checked in JavaScript: llama.cpp can abort the
 * process on some malformed files.
 */
export async function checkModelFile(model: string): Promise<void> {
  try {
    checkModelSummary(await readGgufSummary(model));
  } catch (err) {
    const reason = err instanceof GgufError ? err.message : `cannot read it: ${(err as Error).message}`;
    throw new StartupError(
      'VIGIL_ERR_INFERENCE_LOAD',
      `model load failed: ${model} is not a usable GGUF model: ${reason}`,
    );
  }
}

/** The certificate, key and CA of the mTLS listener; null when it is off. */
export async function readTlsFiles(config: ServerConfig): Promise<TlsFiles | null> {
  if (!config.mtls) return null;
  try {
    return {
      cert: await readFile(config.tlsCert!),
      key: await readFile(config.tlsKey!),
      ca: await readFile(config.tlsCa!),
    };
  } catch (err) {
    throw new ConfigError(`cannot read the TLS files: ${(err as Error).message}`);
  }
}

/**
 * The access log, opened for appending; null when none is configured. It names clients and
 * models: created 0600, its directory (when missing) 0700, whatever the umask.
 */
export function openAccessLog(config: ServerConfig): AccessLog | null {
  if (!config.accessLog) return null;
  try {
    ensureDir(dirname(config.accessLog), PRIVATE_DIR);
    return new AccessLog(openSync(config.accessLog, 'a', PRIVATE_FILE));
  } catch (err) {
    throw new ConfigError(`cannot open the access log ${config.accessLog}: ${(err as Error).message}`);
  }
}

export interface ServiceServers {
  /** The plain HTTP and mutual-TLS servers, not listening yet; null for a listener that is off. */
  readonly http: Server | null;
  readonly mtls: Server | null;
  /** The mTLS listener's refused handshakes (flushed on shutdown). */
  readonly refusals: RefusalLog;
}

/** The plain HTTP and mutual-TLS servers the configuration asks for, each with `handler(listener)`. */
export function createServers(
  config: ServerConfig,
  tls: TlsFiles | null,
  handler: (listener: 'http' | 'mtls') => RequestListener,
  logger: Logger,
): ServiceServers {
  const refusals = refusalLog(logger);
  const http = config.http ? createHttpServer({ noDelay: true }, handler('http')) : null;
  let mtls: Server | null = null;
  if (config.mtls && tls) {
    try {
      mtls = createHttpsServer(
        { cert: tls.cert, key: tls.key, ca: tls.ca, requestCert: true, rejectUnauthorized: true, noDelay: true },
        handler('mtls'),
      );
    } catch (err) {
      throw new ConfigError(`the TLS files are not usable: ${(err as Error).message}`);
    }
    watchRefusals(mtls as unknown as TlsServer, refusals, logger);
  }
  return { http, mtls, refusals };
}

/** Slow-header and idle protections; the completion itself is bounded by requestTimeoutMs. */
export function protectListeners(servers: ServiceServers, config: ServerConfig): void {
  for (const s of [servers.http, servers.mtls]) {
    if (!s) continue;
    s.headersTimeout = 30_000;
    s.requestTimeout = Math.max(config.requestTimeoutMs + 5_000, 60_000);
  }
}

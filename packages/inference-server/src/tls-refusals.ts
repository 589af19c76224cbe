/**
 * Refused mutual-TLS clients, logged at warn with the reason (no certificate, a certificate from
 * another CA, expired, not yet valid), one line per episode: the first refusal of a client for a
 * reason is logged at once; more of the same within the window are counted and reported in one
 * line when the window ends, so that a client that hammers cannot flood the log. The table of
 * episodes is bounded.
 */
import type { Socket } from 'node:net';
import type { TLSSocket, Server as TlsServer } from 'node:tls';
import type { Logger } from './logger.js';

/** Why a handshake was refused, in words, from Node's error and the socket's authorization error. */
export function refusalReason(err: { code?: string }, authorizationError: unknown): string | null {
  const auth = typeof authorizationError === 'string' ? authorizationError : null;
  if (err.code === 'ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE') return 'no client certificate';
  switch (auth) {
    case null:
      return null;
    case 'CERT_HAS_EXPIRED':
      return 'client certificate expired';
    case 'CERT_NOT_YET_VALID':
      return 'client certificate not yet valid';
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
      return 'client certificate not signed by --tls-ca (unknown CA)';
    default:
      return `client certificate refused (${auth})`;
  }
}

export interface RefusalLog {
  /** One refused handshake of `remote` for `reason`. */
  note(remote: string | null, reason: string): void;
  /** Reports the counts of episodes still open and forgets them (shutdown). */
  flush(): void;
}

interface Episode {
  suppressed: number;
  timer: NodeJS.Timeout;
}

/** One warn line per (client address, reason) and window; repeats counted. At most `maxEpisodes` tracked. */
export function refusalLog(logger: Logger, windowMs = 60_000, maxEpisodes = 256): RefusalLog {
  const episodes = new Map<string, Episode>();
  const report = (key: string, ep: Episode) => {
    const [remote, reason] = JSON.parse(key) as [string | null, string];
    logger.warn('mTLS handshakes refused', { remote, reason, count: ep.suppressed, window_s: windowMs / 1000 });
  };
  const close = (key: string) => {
    const ep = episodes.get(key);
    if (!ep) return;
    if (ep.suppressed === 0) {
      episodes.delete(key);
      return;
    }
    // Still going on: report the count and open a new window.
    report(key, ep);
    ep.suppressed = 0;
    ep.timer = setTimeout(() => close(key), windowMs).unref();
  };
  return {
    note(remote, reason) {
      // Beyond the table's size every client shares one episode per reason.
      let who = remote;
      if (!episodes.has(JSON.stringify([who, reason])) && episodes.size >= maxEpisodes) who = null;
      const key = JSON.stringify([who, reason]);
      const ep = episodes.get(key);
      if (ep) {
        ep.suppressed++;
        return;
      }
      logger.warn('mTLS handshake refused', { remote: who, reason });
      episodes.set(key, { suppressed: 0, timer: setTimeout(() => close(key), windowMs).unref() });
    },
    flush() {
      for (const [key, ep] of episodes) {
        clearTimeout(ep.timer);
        if (ep.suppressed > 0) report(key, ep);
      }
      episodes.clear();
    },
  };
}

/** Logs the mTLS listener's refused handshakes through `log`; other handshake failures at debug. */
export function watchRefusals(server: TlsServer, log: RefusalLog, logger: Logger): void {
  // Node destroys a refused socket before 'tlsClientError': its address is read (and cached by
  // the raw socket) when the connection arrives.
  server.on('connection', (raw: Socket) => {
    void raw.remoteAddress;
  });
  server.on('tlsClientError', (err: Error & { code?: string }, socket: TLSSocket) => {
    const raw = (socket as unknown as { _parent?: Socket | null })._parent;
    const remote = socket.remoteAddress ?? raw?.remoteAddress ?? null;
    const reason = refusalReason(err, socket.authorizationError);
    if (reason === null) logger.debug('TLS handshake failed', { remote, error: err.code ?? err.message });
    else log.note(remote, reason);
  });
}

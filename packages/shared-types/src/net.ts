/**
 * Addresses and ports of the vigil stack, and the pure functions that read and print them.
 * Every listener is a flag; these are the defaults (DESIGN.md section 1, spec section 8).
 */
import { VIGIL_ERRORS, VigilError } from './errors.js';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export const LOOPBACK_HOST = '127.0.0.1';

/** The messaging daemon's JSON-RPC over HTTP (and SSE, check). */
export const DAEMON_HTTP: HostPort = { host: LOOPBACK_HOST, port: 8080 };
/** The messaging daemon's newline-delimited JSON-RPC over TCP. */
export const DAEMON_TCP: HostPort = { host: LOOPBACK_HOST, port: 7583 };
/** The host-to-VM link address the relay listens on. */
export const RELAY_LISTEN: HostPort = { host: '10.0.0.1', port: 7583 };
/** Where the relay forwards to: the daemon's TCP listener. */
export const RELAY_TARGET: HostPort = DAEMON_TCP;
/** The inference server's plain HTTP listener. */
export const INFERENCE_HTTP: HostPort = { host: LOOPBACK_HOST, port: 1337 };
/** The inference server's mutual-TLS listener. */
export const INFERENCE_MTLS: HostPort = { host: LOOPBACK_HOST, port: 1338 };
/** The status page (a live view of the stack for its owner; loopback unless asked otherwise). */
export const STATUS_PAGE: HostPort = { host: LOOPBACK_HOST, port: 8099 };
/** The flow gateway (a consumer outside vigil, checked by the health check). */
export const FLOW_GATEWAY: HostPort = { host: LOOPBACK_HOST, port: 4077 };
/** Ports of the retired REST wrappers: nothing may answer there. */
export const RETIRED_PORTS: readonly number[] = [18081, 18082];

/** HTTP paths of the messaging daemon (prefix /api/v1) and of the inference server (/v1). */
export const DAEMON_PATHS = {
  rpc: '/api/v1/rpc',
  events: '/api/v1/events',
  check: '/api/v1/check',
} as const;

export const INFERENCE_PATHS = {
  models: '/v1/models',
  chatCompletions: '/v1/chat/completions',
  responses: '/v1/responses',
  messages: '/v1/messages',
  countTokens: '/v1/messages/count_tokens',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  health: '/health',
} as const;

/** An address or port that cannot be read (bad usage, exit 78). */
export class AddressError extends VigilError {
  constructor(message: string) {
    super(VIGIL_ERRORS.VIGIL_ERR_ADDRESS, message);
  }
}

/** Parses a port number (0 allowed: "any free port"). */
export function parsePort(text: string): number {
  if (!/^\d{1,5}$/.test(text)) {
    throw new AddressError(`invalid port "${text}": expected an integer from 0 to 65535`);
  }
  const port = Number(text);
  if (port > 65535) {
    throw new AddressError(`invalid port "${text}": expected an integer from 0 to 65535`);
  }
  return port;
}

/**
 * Parses `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (the host then defaults to
 * `defaultHost`). Throws AddressError with a message that names the bad part.
 */
export function parseHostPort(text: string, defaultHost: string = LOOPBACK_HOST): HostPort {
  const spec = text.trim();
  if (spec === '') throw new AddressError('empty address: expected HOST:PORT');
  let host: string;
  let portText: string;
  if (spec.startsWith('[')) {
    const close = spec.indexOf(']');
    if (close < 0 || spec[close + 1] !== ':') {
      throw new AddressError(`invalid address "${spec}": expected [IPv6]:PORT`);
    }
    host = spec.slice(1, close);
    portText = spec.slice(close + 2);
  } else {
    const colon = spec.lastIndexOf(':');
    if (colon < 0) {
      host = defaultHost;
      portText = spec;
    } else {
      if (spec.indexOf(':') !== colon) {
        throw new AddressError(`invalid address "${spec}": write IPv6 hosts as [ADDR]:PORT`);
      }
      host = colon === 0 ? defaultHost : spec.slice(0, colon);
      portText = spec.slice(colon + 1);
    }
  }
  if (host === '') throw new AddressError(`invalid address "${spec}": empty host`);
  return { host, port: parsePort(portText) };
}

/**
 * Parses a listener flag: an address, or `off` (case-insensitive) for "do not listen", which
 * gives `null`.
 */
export function parseListen(text: string, defaultHost: string = LOOPBACK_HOST): HostPort | null {
  if (text.trim().toLowerCase() === 'off') return null;
  return parseHostPort(text, defaultHost);
}

/** `host:port`, with IPv6 hosts in brackets. */
export function formatHostPort(addr: HostPort): string {
  return addr.host.includes(':') ? `[${addr.host}]:${addr.port}` : `${addr.host}:${addr.port}`;
}

/** True for 127.0.0.0/8, ::1, ::ffff:127.x.x.x and the name localhost. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(v4);
  return m !== null && m[1] === '127' && m.slice(2).every((o) => Number(o) <= 255);
}

/** True for the wildcard addresses that bind every interface. */
export function isWildcardHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === '0.0.0.0' || h === '::' || h === '0:0:0:0:0:0:0:0';
}

/** The host name of a Host header, without port or IPv6 brackets, lower case. */
export function hostHeaderName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end < 0 ? h.slice(1) : h.slice(1, end);
  }
  return h.replace(/:\d*$/, '');
}

/**
 * DNS-rebinding protection: a request's Host header is accepted when the listener is bound to a
 * wildcard address, or when it names the bound address or a loopback name (any case, any port).
 * A request without a Host header (HTTP/1.0) is accepted.
 */
export function hostAllowed(header: string | undefined, bindHost: string): boolean {
  if (header === undefined || header === '' || isWildcardHost(bindHost)) return true;
  const name = hostHeaderName(header);
  return isLoopbackHost(name) || name === bindHost.toLowerCase().replace(/^\[|\]$/g, '');
}

/**
 * A list given as one string (an environment variable mirroring a repeatable flag, or a
 * configuration value): items separated by commas and/or white space, empty items dropped.
 */
export function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

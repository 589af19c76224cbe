/**
 * One error base class and one way to list error codes, for every vigil package.
 *
 * Each package keeps one catalogue, `defineErrors({...})` in its `src/errors.ts` (as fastify's
 * `FST_ERR_*` or pnpm's `ERR_PNPM_*`): per code what it means, the hint printed after the message,
 * the exit code a binary ends with, and how a protocol answers it (HTTP status, JSON-RPC code, the
 * protocol's own code) where it reaches a client. Codes are namespaced as fastify's and undici's:
 * `VIGIL_ERR_<PACKAGE>_…` (GUARDIAN, HEALTH, INFERENCE, DAEMON, RELAY, STACK), and plain
 * `VIGIL_ERR_…` for the shared ones below; `VIGIL_ERR_` keeps them apart from the `VIGIL_…`
 * environment variables. A VigilError is made from a catalogue entry only, so every code a package
 * throws is in its catalogue; the repository's errors test checks that every catalogued code is
 * used and documented in its package's README.
 */
import { RpcErrorCode } from './jsonrpc.js';
import { ExitCode } from './process.js';

/** One code of a catalogue. */
export interface ErrorSpec {
  /** What the code means, one line (the error's own message gives the particulars). */
  readonly message: string;
  /** What to do about it, one short sentence; printed after the message by the CLIs. */
  readonly hint?: string;
  /** The exit code a binary ends with (default 1, a runtime failure). */
  readonly exitCode?: number;
  /** The HTTP status a client gets, where the error is answered over HTTP. */
  readonly http?: number;
  /** The JSON-RPC error code a client gets (signal-cli's codes, `RpcErrorCode`). */
  readonly rpc?: number;
  /** The protocol's own code a client or library sees (OpenAI's `code`, commander's `code`). */
  readonly wire?: string;
}

/** A catalogue entry with its code and its exit code filled in. */
export type CataloguedError<C extends string = string> = ErrorSpec & { readonly code: C; readonly exitCode: number };

export type ErrorCatalogue<T extends Record<string, ErrorSpec>> = {
  readonly [K in keyof T & string]: T[K] & CataloguedError<K>;
};

/** A package's catalogue: every code `VIGIL_ERR_…` in upper case, each entry given its code and exit code. */
export function defineErrors<const T extends Record<`VIGIL_ERR_${string}`, ErrorSpec>>(entries: T): ErrorCatalogue<T> {
  const out: Record<string, CataloguedError> = {};
  for (const [code, spec] of Object.entries(entries) as [string, ErrorSpec][]) {
    if (!/^VIGIL_ERR_[A-Z0-9]+(_[A-Z0-9]+)*$/.test(code))
      throw new Error(`error code ${code}: expected VIGIL_ERR_ and upper-case words`);
    out[code] = Object.freeze({ ...spec, code, exitCode: spec.exitCode ?? ExitCode.FAILURE });
  }
  return Object.freeze(out) as ErrorCatalogue<T>;
}

/** The codes every package shares. */
export const VIGIL_ERRORS = defineErrors({
  VIGIL_ERR_CONFIG: { message: 'bad usage or configuration (a flag, a variable, a configuration file)', exitCode: 78 },
  VIGIL_ERR_FLAG_VALUE: {
    message: 'a flag value that cannot be used; commander reports it as its own',
    exitCode: 78,
    wire: 'commander.invalidArgument',
  },
  VIGIL_ERR_ADDRESS: { message: 'an address that is not HOST:PORT, or a port out of range', exitCode: 78 },
  VIGIL_ERR_LISTEN: { message: 'a listener that cannot be opened (port in use, address not on this host, permission)' },
  VIGIL_ERR_LOCK_BUSY: { message: 'a lock file held by a live process', hint: 'wait for it to finish, or end it' },
  VIGIL_ERR_SYMLINK_DIR: { message: "a file's directory is a symbolic link someone other than root made: not written" },
  VIGIL_ERR_MANIFEST_FORMAT: {
    message: 'a manifest that is not a vigil manifest, or whose signature field is malformed',
  },
  VIGIL_ERR_WIRE_TIMEOUT: { message: 'a request to a vigil service that got no answer in its time' },
  VIGIL_ERR_WIRE_REFUSED: { message: 'a request to a vigil service where nothing listens' },
  VIGIL_ERR_WIRE_RESET: { message: 'a request whose connection was closed before the answer ended' },
  VIGIL_ERR_WIRE_NETWORK: { message: 'a request that failed on the network (no route, a TLS handshake, …)' },
  VIGIL_ERR_WIRE_TOO_LARGE: { message: "an answer over the client's size limit" },
  VIGIL_ERR_WIRE_ABORTED: { message: 'a request its caller gave up' },
  VIGIL_ERR_WIRE_TLS_FILES: { message: 'a client certificate, key or CA file that cannot be read' },
  VIGIL_ERR_WIRE_HTTP_STATUS: { message: 'an answer with an HTTP status its client cannot use' },
  VIGIL_ERR_WIRE_BAD_REPLY: { message: 'an answer that is not what its protocol says (not JSON, a wrong shape)' },
  VIGIL_ERR_WIRE_RPC_ERROR: { message: 'a JSON-RPC call the daemon answered with an error (the code is in rpcCode)' },
  VIGIL_ERR_RPC_PARSE_ERROR: { message: 'a JSON-RPC message that is not JSON', rpc: RpcErrorCode.PARSE_ERROR },
  VIGIL_ERR_RPC_INVALID_REQUEST: {
    message: 'a JSON-RPC message that is not a request, or over the size limits',
    rpc: RpcErrorCode.INVALID_REQUEST,
  },
  VIGIL_ERR_RPC_INVALID_PARAMS: {
    message: 'a JSON-RPC parameter over its size limit',
    rpc: RpcErrorCode.INVALID_PARAMS,
  },
});

export interface VigilErrorOptions {
  /** Replaces the catalogue's hint. */
  readonly hint?: string | undefined;
  readonly cause?: unknown;
}

export class VigilError extends Error {
  readonly code: string;
  readonly hint: string | undefined;
  readonly exitCode: number;

  /** An error of a catalogued code; the message defaults to the catalogue's. */
  constructor(spec: CataloguedError, message: string = spec.message, options: VigilErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = spec.code;
    this.hint = options.hint ?? spec.hint;
    this.exitCode = spec.exitCode;
  }
}

/** Bad usage or configuration: a binary ends with 78 (it will not go away by itself). */
export class ConfigError extends VigilError {
  constructor(message: string, options: VigilErrorOptions = {}) {
    super(VIGIL_ERRORS.VIGIL_ERR_CONFIG, message, options);
  }
}

/** The exit code for an error that ended a binary: its own, else 1. */
export function exitCodeFor(err: unknown): number {
  const code = (err as { exitCode?: unknown } | null)?.exitCode;
  return typeof code === 'number' && Number.isInteger(code) ? code : ExitCode.FAILURE;
}

/** The one line a CLI prints for an error: the message, then its hint when it has one. */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const hint = (err as { hint?: unknown }).hint;
  return typeof hint === 'string' && hint ? `${err.message} (${hint})` : err.message;
}

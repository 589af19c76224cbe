import { ExitCode, formatHostPort, type HostPort } from '@vigil/shared-types';

/** A configuration error: the CLI prints its message in one line and exits 78. */
export class ConfigError extends Error {
  readonly code = 'ECONFIG';
  readonly exitCode = ExitCode.CONFIG;
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * A start-up failure that is not a configuration error (manifest mismatch, bad signature, model
 * load failure): one line, exit 1.
 */
export class StartupError extends Error {
  readonly exitCode = ExitCode.FAILURE;
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'StartupError';
  }
}

/** A listen failure, with the operator's words: "address already in use: 127.0.0.1:1337". */
export class ListenError extends Error {
  readonly code: string;
  readonly exitCode = ExitCode.FAILURE;
  constructor(what: string, addr: HostPort, cause: NodeJS.ErrnoException) {
    const reason =
      cause.code === 'EADDRINUSE'
        ? 'address already in use'
        : cause.code === 'EADDRNOTAVAIL'
          ? 'address not available on this host'
          : cause.code === 'EACCES'
            ? 'permission denied'
            : (cause.message ?? String(cause));
    super(`cannot listen for ${what} on ${formatHostPort(addr)}: ${reason}`);
    this.name = 'ListenError';
    this.code = cause.code ?? 'ELISTEN';
  }
}

/** The exit code for an error that ended start-up. */
export function exitCodeFor(err: unknown): number {
  const code = (err as { exitCode?: unknown } | null)?.exitCode;
  return typeof code === 'number' ? code : ExitCode.FAILURE;
}

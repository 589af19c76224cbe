/**
 * One error base class for every vigil package: a stable `code` (what a program tests), a message
 * (what a person reads), an optional hint (what to do about it) and the exit code a binary ends
 * with when the error ends it. Each package derives its own errors from it in its `errors.ts`.
 */
import { ExitCode } from './process.js';

export interface VigilErrorOptions {
  /** What to do about it, one short sentence; printed after the message by the CLIs. */
  readonly hint?: string | undefined;
  /** The exit code a binary ends with (default 1, a runtime failure). */
  readonly exitCode?: number;
  readonly cause?: unknown;
}

export class VigilError extends Error {
  readonly code: string;
  readonly hint: string | undefined;
  readonly exitCode: number;

  constructor(code: string, message: string, options: VigilErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.hint = options.hint;
    this.exitCode = options.exitCode ?? ExitCode.FAILURE;
  }
}

/** Bad usage or configuration: a binary ends with 78 (it will not go away by itself). */
export class ConfigError extends VigilError {
  constructor(message: string, options: Omit<VigilErrorOptions, 'exitCode'> = {}) {
    super('ECONFIG', message, { ...options, exitCode: ExitCode.CONFIG });
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

/** Exit codes shared by every vigil binary. */
export const ExitCode = {
  OK: 0,
  /** A runtime failure (for example the model failed to load). */
  FAILURE: 1,
  /** Manual intervention required: do not respawn (systemd RestartPreventExitStatus=2). */
  MANUAL: 2,
  /** Bad usage or configuration (sysexits EX_CONFIG); also a missing binary at respawn (spec 3.4). */
  CONFIG: 78,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * The environment variable that mirrors a command-line flag: `signal-daemon`, `--max-request-bytes`
 * gives `SIGNAL_DAEMON_MAX_REQUEST_BYTES`.
 */
export function envVarFor(binary: string, flag: string): string {
  const norm = (s: string) =>
    s
      .replace(/^-+/, '')
      .replace(/[^A-Za-z0-9]+/g, '_')
      .toUpperCase();
  return `${norm(binary)}_${norm(flag)}`;
}

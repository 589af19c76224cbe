/**
 * `@vigil/shared-types/light`: what a command-line program needs before it knows what it will do
 * (run, parse flags, exit codes and errors, terminal-safe text, files, the clients of vigil's own
 * wire for a quick `status`), without zod and the configuration schemas.
 * Loading zod and the schemas takes ~90 ms, more than `node` itself needs to start: a CLI imports
 * this statically, and the main entries (or `/node`) with `await import()` where a command needs
 * them, so `--help` and a quick `status` start fast.
 */

export { ConfigError, defineErrors, VIGIL_ERRORS, VigilError } from '../errors.js';
export { GUARDIAN_DEFAULTS } from '../guardian.js';
export { HealthExit, type HealthExitCode, type HealthReport } from '../health.js';
export { isProbeSuccess, probeRequest } from '../inference.js';
export { MESSAGING_LIMITS } from '../limits.js';
export { lineTime, SERVICE_LOG_LEVELS, type ServiceLogLevel } from '../log.js';
export { RELAY_REFUSED_METHODS } from '../messaging.js';
export * from '../net.js';
export { ExitCode } from '../process.js';
export { terminalSafe } from '../terminal.js';
export { binProgram, cliExitCode, type ProgramLike, runCli, stopOnSignals } from './cli.js';
export * from './daemon-client.js';
export * from './flags.js';
export * from './fs.js';
export * from './inference-client.js';
export * from './options.js';
export { sleep } from './proc.js';
export * from './wire-http.js';

/**
 * The health check: proves the messaging side works end to end (daemon, relay link, retired
 * ports, the consumer pipeline), repairs what a machine can with --fix, and says clearly when a
 * person must act.
 */
export { CHECKS, type Check, type CheckContext, lineTime, portOf, runCheck, withPort } from './checks.js';
export { ConfigError, type HealthConfig, loadConfig, resolveConfig, schema, stateHome } from './config.js';
export { findProcesses, listenersOn, listProcesses, type ProcessInfo, runsProgram } from './io.js';
export { formatReport, LockedError, runChecks, takeLock } from './run.js';
export { VERSION } from './version.js';

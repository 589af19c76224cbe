/**
 * The health check: proves the messaging side works end to end (daemon, relay link, retired
 * ports, the consumer pipeline), repairs what a machine can with --fix, and says clearly when a
 * person must act.
 */

// The process table is @vigil/shared-types/node's; re-exported for scripts/start.mjs until the
// stack imports it from there.
export { findProcesses, listenersOn, listProcesses, type ProcessInfo, runsProgram } from '@vigil/shared-types/node';
export { CHECKS, type Check, type CheckContext, type Finding, portOf, runCheck, withPort } from './checks/index.js';
export { type HealthConfig, loadConfig, resolveConfig, schema, stateHome } from './config.js';
export { ConfigError, ConfigValidationError, LockedError, NotRunError } from './errors.js';
export { appendReport, formatReport, runChecks, takeLock } from './run.js';
export { VERSION } from './version.js';

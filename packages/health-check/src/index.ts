/**
 * The health check: proves the messaging side works end to end (daemon, relay link, retired
 * ports, the consumer pipeline), repairs what a machine can with --fix, and says clearly when a
 * person must act.
 */

export { CHECKS, type Check, type CheckContext, type Finding, portOf, runCheck, withPort } from './checks/index.js';
export { type HealthConfig, loadConfig, resolveConfig, schema, stateHome } from './config.js';
export { ConfigError, ConfigValidationError, LockedError, NotRunError } from './errors.js';
export { HEALTH_CHECK_OPTIONS } from './options.js';
export { appendReport, formatReport, runChecks, takeLock } from './run.js';
export { VERSION } from './version.js';

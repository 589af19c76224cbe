/** @vigil/stack: the whole stack on one host. */
export { buildProgram, main, normalizeArgv } from './cli.js';
export * from './config.js';
export * from './configs.js';
export * from './control.js';
export * from './errors.js';
export { LOG_NAMES, lastLines, logFileOf, printLog, readTail } from './logs.js';
export { type HomePaths, homeOf, homePaths } from './paths.js';
export * from './services.js';
export { startStack } from './start.js';
export * from './status.js';
export { VERSION } from './version.js';

/**
 * The messaging daemon: one messaging account over JSON-RPC on HTTP and newline-delimited TCP,
 * Server-Sent Events of incoming messages, a health endpoint; on the embedded local network.
 */
export type { Backend, BackendState } from './backend.js';
export { type DaemonConfig, type DaemonOptions, DEFAULTS, dataHome, resolveConfig } from './config.js';
export { type DaemonHandle, ListenError, start } from './daemon.js';
export { ConfigError, RpcFailure } from './errors.js';
export { Inbox, type InboxEvent } from './inbox.js';
export { createLogger, type Logger, memoryLogger } from './logger.js';
export { VERSION } from './version.js';

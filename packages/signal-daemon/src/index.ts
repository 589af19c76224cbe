/**
 * The messaging daemon: one messaging account over JSON-RPC on HTTP and newline-delimited TCP,
 * Server-Sent Events of incoming messages, a health endpoint; on the embedded local network.
 */
export { type Logger, memoryLogger } from '@vigil/shared-types';
export type { Backend, BackendState } from './backend.js';
export { type DaemonConfig, type DaemonOptions, dataHome, optionsFromFlags, resolveConfig } from './config.js';
export { type DaemonHandle, start } from './daemon.js';
export { ConfigError, ListenError, RpcFailure } from './errors.js';
export { Inbox, type InboxEvent } from './inbox.js';
export { MIN_LOCALNET_RETENTION_HOURS, SIGNAL_DAEMON_OPTIONS } from './options.js';
export { VERSION } from './version.js';

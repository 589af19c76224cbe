/**
 * `@vigil/shared-types/node`: the few Node helpers every vigil service needs, on Node built-ins
 * only, one implementation of each.
 */
export * from './cli.js';
export * from './command.js';
export * from './config-file.js';
export * from './daemon-client.js';
export * from './flags.js';
export * from './fs.js';
export * from './http-client.js';
export * from './inference-client.js';
export * from './lifecycle.js';
export * from './listen.js';
export * from './lock.js';
export * from './logger.js';
export * from './options.js';
export * from './ports.js';
export * from './proc.js';
export * from './sd-notify.js';
export * from './serve.js';
export * from './wire-http.js';

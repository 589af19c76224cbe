export * from './framing.js';
export * from './guardian.js';
export * from './health.js';
export * from './inference.js';
export * from './jsonrpc.js';
export * from './messaging.js';
export * from './net.js';
export * from './process.js';

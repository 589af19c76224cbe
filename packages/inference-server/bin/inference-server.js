#!/usr/bin/env node
// node-llama-cpp runs its native work on libuv's thread pool (4 threads by default), which the
// access log and file reads share: give it room before anything uses it.
process.env.UV_THREADPOOL_SIZE ??= '16';
await import('../dist/cli.js');

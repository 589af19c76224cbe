#!/usr/bin/env node
// Starts the vigil stack on this machine with its embedded defaults (local network, no account,
// no download) and keeps it running until Ctrl-C, which stops every process it started.
// State and logs live under $VIGIL_HOME (default: .vigil/ in the repository).
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const home = process.env.VIGIL_HOME ?? join(root, '.vigil');
mkdirSync(home, { recursive: true, mode: 0o700 });

const bin = (pkg, name = pkg) => join(root, 'packages', pkg, 'bin', `${name}.js`);

/** What the stack runs, in start order. Each entry is a process and what it serves. */
const services = [
  {
    name: 'signal-daemon',
    argv: [
      bin('signal-daemon'),
      '--account',
      process.env.VIGIL_ACCOUNT ?? '+15550000001',
      '--data-dir',
      join(home, 'signal-daemon'),
      '--localnet',
      join(home, 'localnet.sqlite'),
    ],
    serves: 'JSON-RPC http://127.0.0.1:8080/api/v1/rpc, tcp 127.0.0.1:7583',
  },
];

const children = new Map();
let stopping = false;

for (const svc of services) {
  const child = spawn(process.execPath, svc.argv, { stdio: ['ignore', 'inherit', 'inherit'] });
  children.set(svc.name, child);
  child.on('exit', (code, signal) => {
    children.delete(svc.name);
    if (!stopping) {
      console.error(`vigil: ${svc.name} exited (${signal ?? `code ${code}`})`);
    }
    if (children.size === 0) process.exit(stopping ? 0 : 1);
  });
}

console.log('vigil: started');
console.log(services.map((s) => `  ${s.name.padEnd(18)} ${s.serves}`).join('\n'));
console.log(`  state and logs     ${home}`);
console.log('Press Ctrl-C to stop.');

function stop() {
  if (stopping) return;
  stopping = true;
  console.log('vigil: stopping');
  for (const child of children.values()) child.kill('SIGTERM');
  // A process that does not stop within 15 s is killed.
  setTimeout(() => {
    for (const child of children.values()) child.kill('SIGKILL');
  }, 15_000).unref();
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

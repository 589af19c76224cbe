#!/usr/bin/env node
// Controls a running vigil stack (scripts/start.mjs) through its control socket:
//
//   node scripts/ctl.mjs [--home DIR] status [--json]
//   node scripts/ctl.mjs [--home DIR] start|stop|restart SERVICE
//
// SERVICE: signal-daemon, tcp-relay, inference-server, inference-fallback, guardian. This is the
// `command` service manager of the stack's guardian and health check: `restart` returns once the
// old process has ended and the new one is started (not yet ready), as `launchctl kickstart -k`
// does. Exit codes: 0 done; 1 refused or failed (the reason on stderr); 3 no stack is running
// from that home; 64 bad usage.
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const usage = 'usage: ctl.mjs [--home DIR] status [--json] | start|stop|restart SERVICE';

let values;
let positionals;
try {
  ({ values, positionals } = parseArgs({
    options: { home: { type: 'string' }, json: { type: 'boolean' } },
    allowPositionals: true,
  }));
} catch (err) {
  process.stderr.write(`ctl: ${err.message}\n${usage}\n`);
  process.exit(64);
}
const [action, service] = positionals;
if (
  !(action === 'status' && positionals.length === 1) &&
  !(['start', 'stop', 'restart'].includes(action) && positionals.length === 2)
) {
  process.stderr.write(`${usage}\n`);
  process.exit(64);
}
const home = values.home ?? process.env.VIGIL_HOME ?? join(ROOT, '.vigil');
const socket = join(home, 'run', 'control.sock');

const c = connect(socket);
let reply = '';
// A restart waits for the old process to end (its grace is at most 15 s).
const timer = setTimeout(() => {
  process.stderr.write(`ctl: no answer from the stack within 30 s\n`);
  process.exit(1);
}, 30_000);
c.setEncoding('utf8');
c.on('connect', () => c.write(`${JSON.stringify({ action, service })}\n`));
c.on('data', (d) => {
  reply += d;
});
c.on('error', (err) => {
  clearTimeout(timer);
  process.stderr.write(`ctl: no vigil stack is running from ${home} (${err.code ?? err.message})\n`);
  process.exit(3);
});
c.on('end', () => {
  clearTimeout(timer);
  let r;
  try {
    r = JSON.parse(reply);
  } catch {
    process.stderr.write(`ctl: unreadable answer: ${reply.slice(0, 200)}\n`);
    process.exit(1);
  }
  if (!r.ok) {
    process.stderr.write(`ctl: ${r.error}\n`);
    process.exit(1);
  }
  if (action === 'status' && values.json) process.stdout.write(`${JSON.stringify(r.services)}\n`);
  else if (action === 'status') {
    for (const s of r.services) {
      const last = s.lastExit ? `, last exit ${s.lastExit.signal ?? s.lastExit.code} at ${s.lastExit.at}` : '';
      process.stdout.write(
        `${s.name.padEnd(20)} ${s.state.padEnd(8)} ${String(s.pid ?? '-').padEnd(8)} starts ${s.starts}${last}\n`,
      );
    }
  } else if (r.pid) process.stdout.write(`${service} started (pid ${r.pid})\n`);
  process.exit(0);
});

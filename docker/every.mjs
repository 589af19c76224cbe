// Runs a command now and then every N seconds, never two at once: the health check's cron in
// its container. Node built-ins only; copied into the image.
//
//   node every.mjs SECONDS -- PROGRAM [ARG...]
//
// The interval is measured from the start of one run to the start of the next; a run that
// overruns is followed at once. The command's exit status is a result, not a reason to stop
// (the health check exits 1 when it healed something, 2 when a person is needed: both are in
// its health log). Output passes through. SIGTERM or SIGINT: no new run; a run under way is
// given SIGTERM and waited for; then exit 0. A second signal exits at once (1). Exit 78: bad usage.
import { spawn } from 'node:child_process';

const args = process.argv.slice(2);
const seconds = Number(args[0]);
if (!(seconds > 0) || args[1] !== '--' || args.length < 3) {
  process.stderr.write('usage: every.mjs SECONDS -- PROGRAM [ARG...]\n');
  process.exit(78);
}
const [program, ...programArgs] = args.slice(2);

let stopping = false;
let child = null;
let wake = null;

const onSignal = () => {
  if (stopping) process.exit(1);
  stopping = true;
  child?.kill('SIGTERM');
  wake?.();
};
process.on('SIGTERM', onSignal);
process.on('SIGINT', onSignal);

function runOnce() {
  return new Promise((resolve) => {
    child = spawn(program, programArgs, { stdio: 'inherit' });
    child.on('error', (err) => {
      process.stderr.write(`every: cannot run ${program}: ${err.message}\n`);
      child = null;
      resolve(null);
    });
    child.on('exit', (code, signal) => {
      child = null;
      resolve(code ?? signal);
    });
  });
}

function sleep(ms) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, Math.max(0, ms));
    wake = () => {
      clearTimeout(t);
      resolve();
    };
  });
}

while (!stopping) {
  const started = performance.now();
  await runOnce();
  if (stopping) break;
  await sleep(seconds * 1000 - (performance.now() - started));
}
process.exitCode = 0;

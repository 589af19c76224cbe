/**
 * First-start preparation of a home: its directories, what a killed supervisor left running, the
 * tiny model and the mutual-TLS certificates (made through the inference server's binary; nothing
 * is downloaded).
 */
import {
  ensureDir,
  fileExists,
  listProcesses,
  PRIVATE_DIR,
  pidAlive,
  runCommand,
  runsProgram,
  sleep,
} from '@vigil/shared-types/node';
import { AlreadyRunningError, StartError } from './errors.js';
import { binOf, type HomePaths, NODE, rel } from './paths.js';
import { readStackFile } from './stackfile.js';

/** The umask of the supervisor and so of every service it starts: what they make is 0600 / 0700. */
export const PRIVATE_UMASK = 0o077;

/**
 * Makes the home's directories 0700, whatever the umask; those that exist (made by an older
 * version, or by hand) are set to 0700 too.
 */
export function makeHome(paths: HomePaths): void {
  for (const dir of paths.dirs) ensureDir(dir, PRIVATE_DIR, true);
}

/**
 * One stack per home: a live supervisor is refused (AlreadyRunningError); the services left by
 * one that died are killed. Returns how many were.
 */
export async function stopLeftovers(paths: HomePaths, say: (line: string) => void): Promise<number> {
  const previous = readStackFile(paths.stackFile);
  if (!previous) return 0;
  const procs = new Map((await listProcesses()).map((p) => [p.pid, p]));
  const supervisor = procs.get(previous.pid);
  if (supervisor && previous.pid !== process.pid && runsProgram(supervisor.argv, 'vigil')) {
    throw new AlreadyRunningError(paths.home, previous.pid);
  }
  // A pid is that service only while it runs the command recorded for it (pids are reused).
  const left = Object.entries(previous.services).filter(([, s]) => procs.get(s.pid)?.command === s.command);
  for (const [name, { pid }] of left) {
    say(`vigil: stopping ${name} (pid ${pid}) left by a stack that did not stop cleanly`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
  for (const end = Date.now() + 5000; left.some(([, s]) => pidAlive(s.pid)) && Date.now() < end; ) await sleep(20);
  return left.length;
}

async function runOnce(argv: string[], what: string): Promise<void> {
  const r = await runCommand([NODE, ...argv], 600_000);
  if (r.rc !== 0) throw new StartError(`${what} failed (exit ${r.rc}):\n${r.stderr || r.stdout}`);
}

/**
 * The model served: `--model`, else the home's tiny model (made on first start). Makes the
 * certificates on first start unless mutual TLS is off.
 */
export async function prepareModelAndCerts(
  paths: HomePaths,
  opts: { model: string | undefined; mtls: unknown },
  say: (line: string) => void,
): Promise<string> {
  const model = opts.model ?? paths.tinyModel;
  if (!opts.model && !fileExists(model)) {
    say(`vigil: making the tiny model ${rel(model)} (first start)`);
    await runOnce([binOf('inference-server'), 'make-model', '--out', model, '--preset', 'tiny'], 'making the model');
  }
  if (!fileExists(model)) throw new StartError(`the model ${model} does not exist`);
  if (opts.mtls !== 'off' && !fileExists(`${paths.pki}/server.pem`)) {
    await runOnce([binOf('inference-server'), 'certs', '--out', paths.pki], 'making the certificates');
  }
  return model;
}

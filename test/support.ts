/** Helpers the tests of every package share: child processes, free ports, waiting for a condition. */
import type { ChildProcess } from 'node:child_process';

/**
 * Resolves once the child has exited and its output has been read to the end: 'exit' can come
 * before the last lines on its pipes are read, 'close' comes after both.
 */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const drained = [child.stdout, child.stderr].every((s) => !s || s.destroyed || s.readableEnded);
  if ((child.exitCode !== null || child.signalCode !== null) && drained) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
}

export { freePort } from '../packages/shared-types/src/node/ports.js';

/** Waits until the predicate holds (polling), or fails naming what did not happen. */
export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

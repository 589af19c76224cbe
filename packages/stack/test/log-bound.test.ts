/**
 * The logs under the stack's home stay bounded: a log over the bound is copied to FILE.1 and cut
 * where it is, while a real process goes on writing to it through the descriptor it opened for
 * appending (as a service's stdout, the guardian's log and the access logs are): its next lines land
 * at the start of the cut file, which stays small, and nothing it wrote before the cut is lost.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { until } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { boundLogs, keepLogsBounded } from '../src/log-bound.js';

const children: ReturnType<typeof spawn>[] = [];
const dirs: { cleanup: () => void }[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const d of dirs.splice(0)) d.cleanup();
});
const newDir = (prefix: string): string => {
  const d = tmpDir(prefix);
  dirs.push(d);
  return d.dir;
};

/** A process writing numbered lines, every 5 ms, to `file` opened for appending as its stdout. */
function writer(file: string) {
  const fd = openSync(file, 'a');
  const child = spawn(
    process.execPath,
    ['-e', 'let i = 0; setInterval(() => process.stdout.write(`line ${i++} ${"x".repeat(200)}\\n`), 5);'],
    { stdio: ['ignore', fd, 'inherit'] },
  );
  closeSync(fd);
  children.push(child);
  return child;
}

const numbers = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((l) => Number(l.split(' ')[1]));

describe('the logs under the home', () => {
  it('cuts a log over the bound to FILE.1 while its writer goes on at the start of the file', async () => {
    const dir = newDir('log-bound-');
    const log = join(dir, 'service.log');
    writer(log);
    await until('the log to pass 20 KiB', () => existsSync(log) && statSync(log).size > 20_000);
    expect(boundLogs([log, join(dir, 'absent.log')], 10_000)).toEqual([log]);
    const kept = numbers(readFileSync(`${log}.1`, 'utf8'));
    expect(kept[0]).toBe(0);
    // The writer goes on in the same file, from its start: no hole of zeros where the old part was.
    await until('new lines after the cut', () => numbers(readFileSync(log, 'utf8')).length > 5);
    const after = readFileSync(log, 'utf8');
    expect(after.startsWith('line ')).toBe(true);
    expect(after.includes('\0')).toBe(false);
    expect(statSync(log).size).toBeLessThan(statSync(`${log}.1`).size);
    // Nothing written before the cut was lost but what came between the copy and the cut.
    const first = numbers(after)[0]!;
    expect(first).toBeGreaterThan(kept[kept.length - 1]!);
    expect(first - kept[kept.length - 1]!).toBeLessThan(20);
    // Under the bound: left alone.
    expect(boundLogs([log], 10_000_000)).toEqual([]);
  });

  it('checks on a timer, says each cut once, and stops when asked', async () => {
    const dir = newDir('log-bound-timer-');
    const log = join(dir, 'a.log');
    writeFileSync(log, 'x'.repeat(5000));
    const lines: string[] = [];
    const stop = keepLogsBounded(
      () => [log],
      1000,
      (l) => lines.push(l),
      50,
    );
    await until('the cut', () => lines.length > 0);
    stop();
    expect(lines).toEqual([`vigil: ${log} reached 0 MiB: the last of it is in ${log}.1`]);
    expect(statSync(log).size).toBe(0);
    writeFileSync(log, 'x'.repeat(5000));
    await new Promise((r) => setTimeout(r, 200));
    expect(statSync(log).size).toBe(5000);
  });
});

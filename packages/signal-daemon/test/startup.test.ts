/**
 * Daemons that start at the same moment on a new local network: a lock held by another process
 * while the file is being set up is waited for, never reported as bad configuration (exit 78).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { BIN, exited, spawnDaemon, tmpDir } from './helpers.js';

const children: ChildProcess[] = [];
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  for (const f of cleanups.splice(0)) f();
});

/** Another process holding a write lock on a new SQLite file (not yet in WAL mode) for `ms`. */
function holdWriteLock(file: string, ms: number): Promise<ChildProcess> {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.exec('BEGIN IMMEDIATE; CREATE TABLE IF NOT EXISTS other (a);');
    process.stdout.write('held\\n');
    setTimeout(() => { db.exec('COMMIT'); db.close(); }, Number(process.argv[2]));`;
  const child = spawn(process.execPath, ['-e', script, file, String(ms)], {
    cwd: join(import.meta.dirname, '..'),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`lock holder exited with ${code}`)));
  });
}

const args = (dir: string, n: number) => [
  '-a',
  `+1555000000${n}`,
  '--http',
  'off',
  '--tcp',
  '127.0.0.1:0',
  '--localnet',
  join(dir, 'localnet.sqlite'),
  '--data-dir',
  join(dir, String(n)),
];

describe('starting on a new local network', () => {
  it('waits for a write lock another process holds while it sets the file up', async () => {
    const t = tmpDir();
    cleanups.push(t.cleanup);
    const holder = await holdWriteLock(join(t.dir, 'localnet.sqlite'), 1000);
    const started = Date.now();
    const d = await spawnDaemon(args(t.dir, 1));
    children.push(d.child);
    expect(Date.now() - started).toBeGreaterThanOrEqual(500);
    expect((await exited(holder)).code).toBe(0);
    d.child.kill('SIGTERM');
    expect((await exited(d.child)).code).toBe(0);
  });

  it('starts all of 5 daemons started at once on a new file, 20 times', async () => {
    for (let round = 0; round < 20; round++) {
      const t = tmpDir();
      cleanups.push(t.cleanup);
      const starts = [1, 2, 3, 4, 5].map((n) => spawnDaemon(args(t.dir, n)));
      const results = await Promise.allSettled(starts);
      for (const r of results) if (r.status === 'fulfilled') children.push(r.value.child);
      const failed = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason));
      expect({ round, failed }).toEqual({ round, failed: [] });
      for (const r of results) if (r.status === 'fulfilled') r.value.child.kill('SIGTERM');
      await Promise.all(results.map((r) => (r.status === 'fulfilled' ? exited(r.value.child) : null)));
    }
  }, 240_000);

  it('a local network with corrupted pages stops the start with a message naming the file', async () => {
    const t = tmpDir();
    cleanups.push(t.cleanup);
    const d = await spawnDaemon(args(t.dir, 1));
    d.child.kill('SIGTERM');
    expect((await exited(d.child)).code).toBe(0);
    // Everything after the first page overwritten: the header is valid, the tables are not.
    const file = join(t.dir, 'localnet.sqlite');
    const fd = openSync(file, 'r+');
    const garbage = Buffer.alloc(statSync(file).size - 4096, 0xa5);
    writeSync(fd, garbage, 0, garbage.length, 4096);
    closeSync(fd);
    const r = spawnSync(process.execPath, [BIN, ...args(t.dir, 1)], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(78);
    expect(r.stderr).toContain(`cannot open the local network ${file}`);
  });
});

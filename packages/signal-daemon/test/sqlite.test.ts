import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { NetworkStore } from '../src/localnet/store.js';
import { tmpDir } from './helpers.js';

const DRIVER = createRequire(import.meta.url).resolve('better-sqlite3');

describe('the SQLite driver', () => {
  it('survives statements collected by a GC that optimized code triggers (Node >= 24.19 aborted there)', () => {
    // Statements become garbage at once while hot code allocates: V8 collects them in a GC that
    // has no JavaScript context entered, which is where a driver built on Node 24.19+'s
    // node::ObjectWrap aborted the process ("Assertion failed: (env) != nullptr").
    const script = `
      const Database = require(${JSON.stringify(DRIVER)});
      const db = new Database(':memory:');
      const churn = (n) => { const a = []; for (let i = 0; i < n; i++) a.push({ i }); return a.length; };
      let rows = 0;
      for (let round = 0; round < 2000; round++) rows += db.prepare('SELECT 1').all().length + churn(2000) * 0;
      db.close();
      console.log(rows);
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect({ status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr }).toEqual({
      status: 0,
      signal: null,
      stdout: '2000\n',
      stderr: '',
    });
  });
});

describe('closing the local network file', () => {
  it('leaves nothing that still opens it: its files removed right after close() stay removed', async () => {
    const tmp = tmpDir();
    try {
      // Closed before its checkpointer thread has started: the thread must not open the file
      // after close() has returned (it used to, and created the file again once it was removed).
      await new NetworkStore(join(tmp.dir, 'localnet.sqlite')).close();
      for (const f of readdirSync(tmp.dir)) rmSync(join(tmp.dir, f));
      await new Promise((r) => setTimeout(r, 300));
      expect(readdirSync(tmp.dir)).toEqual([]);
    } finally {
      tmp.cleanup();
    }
  });
});

describe('--synchronous', () => {
  it('sets how commits reach the disk on the connection: NORMAL by default, FULL when asked', async () => {
    const tmp = tmpDir();
    try {
      const normal = new NetworkStore(join(tmp.dir, 'a.sqlite'));
      const full = new NetworkStore(join(tmp.dir, 'b.sqlite'), 'full');
      // SQLite's numbers: 1 = NORMAL, 2 = FULL.
      expect(normal.db.pragma('synchronous', { simple: true })).toBe(1);
      expect(full.db.pragma('synchronous', { simple: true })).toBe(2);
      await Promise.all([normal.close(), full.close()]);
    } finally {
      tmp.cleanup();
    }
  });
});

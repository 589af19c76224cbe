import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { describe, expect, it } from '@jest/globals';

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

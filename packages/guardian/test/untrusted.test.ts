/**
 * What others can put in the guardian's way, with the real binary: a metrics textfile directory
 * that is a symbolic link (into another user's directory) is not written through, and what a ping
 * service answers is printed with its control characters escaped, never as raw ESC sequences.
 */
import { mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { excerpt } from '../src/index.js';
import { fixture } from './fixture.js';
import { guardian } from './helpers.js';

const fx = fixture();
let pinged: Server | null = null;
fx.onCleanup(async () => {
  pinged?.closeAllConnections();
  await new Promise((r) => (pinged ? pinged.close(r) : r(null)));
});

/** A ping service that fails with a body full of terminal escapes. */
async function hostilePing(): Promise<string> {
  pinged = createServer((req, res) => {
    req.resume();
    res.writeHead(500, { 'content-type': 'text/plain' });
    res.end('\x1b]0;owned\x07\x1b[2J\x1b[31mdown\x1b[0m');
  });
  await new Promise<void>((r) => pinged!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(pinged.address() as AddressInfo).port}/ping/abc`;
}

describe('files and output the guardian cannot be tricked with', () => {
  it('refuses a metricsFile whose directory is a symlink, and escapes a ping reply on stderr', async () => {
    const sc = fx.scenario('untrusted');
    const s = await sc.fault();
    s.setMode('ok');
    const victim = join(sc.dir, 'other-user');
    mkdirSync(victim);
    symlinkSync(victim, join(sc.dir, 'textfile'));
    const config = sc.config(s.port, {
      metricsFile: join(sc.dir, 'textfile', 'vigil_guardian.prom'),
      ping: await hostilePing(),
      pingTimeoutS: 2,
    });
    const r = await guardian(['tick', '-c', config]);
    expect(r.code).toBe(0); // the probe itself succeeded; neither failure changes the verdict
    expect(readdirSync(victim)).toEqual([]);
    expect(r.stderr).toContain(`cannot write the metrics file ${join(sc.dir, 'textfile', 'vigil_guardian.prom')}`);
    expect(r.stderr).toContain('is a symbolic link');
    expect(r.stderr).toContain('HTTP 500: \\x1b]0;owned\\x07\\x1b[2J\\x1b[31mdown');
    expect(r.stderr).not.toContain('\x1b');
    expect(r.stderr).not.toContain('\x07');
  });

  it("escapes control characters in a probe reply's excerpt", () => {
    expect(excerpt('error\x1b[2J\x1b]0;t\x07 body')).toBe('error\\x1b[2J\\x1b]0;t\\x07 body');
  });
});

/**
 * The status page outside `vigil start`: `vigil status-page --restart-with systemd|launchd|compose`
 * as the installed units, plists and compose file run it. There is no systemd user manager and no
 * launchd here: fakes of `systemctl` and `launchctl` first on PATH record their exact argv and
 * print what the real ones print (`systemctl show` blocks, `launchctl list` lines). The page shows
 * the services as the manager reports them, restarts one through it with the token (and runs
 * nothing without), answers its own restart before asking for it, runs the real `guardian reset`
 * and then starts the guardian through the manager; under compose it shows the commands instead.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { exited, freePort, until } from '../../../test/support.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { homePaths } from '../src/paths.js';
import { writeSampleHistory } from '../src/status-page/sample.js';

const VIGIL = fileURLToPath(new URL('../bin/vigil.js', import.meta.url));
const uid = process.getuid?.() ?? 0;
const scratch = tmpDir('vigil-managers-');
const fakeBin = join(scratch.dir, 'bin');
const calls = join(scratch.dir, 'calls');

// Each fake appends its argv (one JSON array a line) and prints FAKE_DIR/NAME.out for `show` and
// `list`; a restart of a unit or label named in FAKE_DIR/fail fails as the real one would.
const fake = (name: string) => `#!/usr/bin/env node
const fs = require('node:fs');
const dir = process.env.FAKE_DIR;
const args = process.argv.slice(2);
fs.appendFileSync(dir + '/calls', JSON.stringify(['${name}', ...args]) + '\\n');
if (args.includes('show') || args[0] === 'list') process.stdout.write(fs.readFileSync(dir + '/${name}.out', 'utf8'));
const fail = fs.existsSync(dir + '/fail') ? fs.readFileSync(dir + '/fail', 'utf8').trim() : null;
if (fail && args.some((a) => a.endsWith(fail))) {
  process.stderr.write('Failed to restart ' + fail + ': Unit ' + fail + ' not found.\\n');
  process.exit(5);
}
`;

const SHOW = [
  ['vigil-signal-daemon.service', 'loaded', 'active', 'running', 4101, 0, '@1700000000', '', 0, 0],
  ['vigil-tcp-relay.service', 'not-found', 'inactive', 'dead', 0, 0, '', '', 0, 0],
  ['vigil-inference-server.service', 'loaded', 'active', 'running', 4242, 3, '@1700000100', '@1700000090', 2, 9],
  ['vigil-inference-fallback.service', 'loaded', 'inactive', 'dead', 0, 0, '', '', 0, 0],
  ['vigil-guardian.service', 'loaded', 'failed', 'failed', 0, 1, '@1700000000', '@1700000200', 1, 2],
  ['vigil-status-page.service', 'loaded', 'active', 'running', 4300, 0, '@1700000000', '', 0, 0],
  ['vigil-health-check.service', 'loaded', 'inactive', 'dead', 0, 0, '@1700000300', '@1700000301', 1, 0],
]
  .map(
    ([id, load, active, sub, pid, n, start, exit, code, status]) =>
      `Id=${id}\nLoadState=${load}\nActiveState=${active}\nSubState=${sub}\nMainPID=${pid}\nNRestarts=${n}\nExecMainStartTimestamp=${start}\nExecMainExitTimestamp=${exit}\nExecMainCode=${code}\nExecMainStatus=${status}\n`,
  )
  .join('\n');
const LIST = [
  'PID\tStatus\tLabel',
  '4101\t0\torg.vigil.signal-daemon',
  '-\t-9\torg.vigil.inference-server',
  '-\t2\torg.vigil.guardian',
  '4300\t0\torg.vigil.status-page',
  '-\t0\torg.vigil.health-check',
  '312\t0\tcom.apple.something',
].join('\n');

let page: ChildProcess | null = null;
let url = '';
let token = '';

async function startPage(restartWith: string): Promise<void> {
  const home = join(scratch.dir, restartWith);
  writeSampleHistory(home, { days: 0.01, tickS: 10, healthRuns: 3, closedPort: await freePort() });
  writeFileSync(calls, '');
  const port = await freePort();
  page = spawn(
    process.execPath,
    [VIGIL, '--home', home, 'status-page', '--listen', `127.0.0.1:${port}`, '--restart-with', restartWith],
    {
      env: { ...process.env, PATH: `${fakeBin}:${process.env.PATH}`, FAKE_DIR: scratch.dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  page.stdout!.on('data', (d) => (out += d));
  page.stderr!.on('data', (d) => (out += d));
  await until('the page to listen', () => out.includes('status page on'), 30_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${out}`);
  });
  url = `http://127.0.0.1:${port}/`;
  token = readFileSync(homePaths(home).statusToken, 'utf8').trim();
}

const recorded = (): string[][] =>
  readFileSync(calls, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as string[]);
/** What was asked besides the state reads. */
const acted = () => recorded().filter((c) => !c.includes('show') && c[1] !== 'list');

const post = async (path: string, withToken = true) => {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      origin: url.replace(/\/$/, ''),
      'content-type': 'application/json',
      ...(withToken ? { 'x-vigil-token': token } : {}),
    },
    body: '{}',
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const status = async () =>
  (await (await fetch(`${url}api/status`)).json()) as {
    managedBy: string;
    services: { name: string; state: string; pid: number | null; restarts: number | null; lastExit: unknown }[] | null;
    servicesError: string | null;
  };

beforeAll(() => {
  mkdirSync(fakeBin);
  for (const name of ['systemctl', 'launchctl']) {
    writeFileSync(join(fakeBin, name), fake(name));
    chmodSync(join(fakeBin, name), 0o755);
  }
  writeFileSync(join(scratch.dir, 'systemctl.out'), SHOW);
  writeFileSync(join(scratch.dir, 'launchctl.out'), LIST);
});
afterEach(async () => {
  if (page && page.exitCode === null) {
    page.kill('SIGTERM');
    await exited(page);
  }
  page = null;
  writeFileSync(join(scratch.dir, 'fail'), '');
});
afterAll(() => scratch.cleanup());

describe('the status page under systemd', () => {
  it('shows the units as systemctl reports them, with a restart button each', async () => {
    await startPage('systemd');
    const s = await status();
    expect(s.managedBy).toBe('systemd');
    const by = Object.fromEntries(s.services!.map((v) => [v.name, v]));
    // A unit that is not installed (no relay) is left out.
    expect(Object.keys(by)).toEqual([
      'signal-daemon',
      'inference-server',
      'inference-fallback',
      'guardian',
      'status-page',
      'health-check',
    ]);
    expect(by['inference-server']).toMatchObject({
      state: 'running',
      pid: 4242,
      restarts: 3,
      lastExit: { code: null, signal: 'SIGKILL', at: new Date(1_700_000_090_000).toISOString() },
    });
    expect(by.guardian).toMatchObject({ state: 'failed', pid: null, lastExit: { code: 2, signal: null } });
    expect(by['inference-fallback']).toMatchObject({ state: 'stopped' });
    expect(by['health-check']).toMatchObject({ state: 'scheduled' });
    expect(recorded()[0]).toEqual([
      'systemctl',
      '--user',
      'show',
      '--timestamp=unix',
      '--property=Id,LoadState,ActiveState,SubState,MainPID,NRestarts,ExecMainStartTimestamp,ExecMainExitTimestamp,ExecMainCode,ExecMainStatus',
      // Every unit vigil install writes (the SHOW lines above, in the same order).
      ...SHOW.split('\n').flatMap((l) => (l.startsWith('Id=') ? [l.slice(3)] : [])),
    ]);
    const html = await (await fetch(url)).text();
    expect(html).toContain('systemd user units');
    expect(html).toContain('<form method="post" action="/api/services/inference-server/restart" class="action">');
    expect(html).toMatch(/exit 2: manual intervention required/);
    // The guardian exited 2: the banner, with the command that starts it again.
    expect(html).toContain('systemctl --user restart vigil-guardian.service');
  }, 60_000);

  it('restarts a unit with systemctl only with the token, and says when systemctl fails', async () => {
    await startPage('systemd');
    expect((await post('api/services/inference-server/restart', false)).status).toBe(403);
    expect(acted()).toEqual([]);
    const ok = await post('api/services/inference-server/restart');
    expect(ok).toMatchObject({ status: 200, body: { ok: true } });
    expect(acted()).toEqual([['systemctl', '--user', 'restart', 'vigil-inference-server.service']]);
    writeFileSync(join(scratch.dir, 'fail'), 'vigil-signal-daemon.service');
    const failed = await post('api/services/signal-daemon/restart');
    expect(failed.status).toBe(502);
    expect(String(failed.body.error)).toMatch(/exited with 5: Failed to restart vigil-signal-daemon\.service/);
    expect((await post('api/services/no-such/restart')).status).toBe(404);
    expect(acted()).toHaveLength(2);
  }, 60_000);

  it('answers its own restart first, then asks systemctl for it', async () => {
    await startPage('systemd');
    const r = await post('api/services/status-page/restart');
    expect(r).toMatchObject({ status: 202, body: { ok: true } });
    await until('the restart to be asked', () =>
      acted().some((c) => c.join(' ') === 'systemctl --user restart vigil-status-page.service'),
    );
  }, 60_000);

  it('shows why the guardian needs a person and the command; a reset from the page clears it and starts the unit', async () => {
    await startPage('systemd');
    const paths = homePaths(join(scratch.dir, 'systemd'));
    expect(existsSync(paths.guardianState)).toBe(false);
    // The guardian gave up: its log says so (as a guardian that exited 2 leaves it).
    const now = Date.now() / 1000;
    appendFileSync(
      paths.log('guardian'),
      `${JSON.stringify({ ts: now, level: 'error', event: 'rate_limit', detail: '3 restarts within 3600 s' })}\n`,
    );
    const banner = async () =>
      /<div class="banner" role="alert" id="guardian-banner">(.*?)<\/div>/.exec(await (await fetch(url)).text())?.[1] ??
      null;
    await until('the banner', async () => (await banner()) !== null);
    const shown = (await banner())!;
    expect(shown).toContain('rate_limit: 3 restarts within 3600 s');
    expect(shown).toContain(
      `${process.execPath} ${fileURLToPath(new URL('../../guardian/bin/guardian.js', import.meta.url))} reset --config ${paths.guardianConfig}`,
    );
    expect(shown).toContain('systemctl --user restart vigil-guardian.service');
    const r = await post('api/guardian/reset');
    expect(r).toMatchObject({ status: 200, body: { ok: true, rc: 0 } });
    expect(String(r.body.detail)).toMatch(/^reset: /);
    expect(existsSync(paths.guardianState)).toBe(true);
    expect(acted()).toEqual([['systemctl', '--user', 'start', 'vigil-guardian.service']]);
    // The unit runs again (as the start made it) and the guardian logged its reset: the banner goes.
    writeFileSync(
      join(scratch.dir, 'systemctl.out'),
      SHOW.replace(
        /(Id=vigil-guardian\.service\nLoadState=loaded\n)ActiveState=failed\nSubState=failed\nMainPID=0/,
        '$1ActiveState=active\nSubState=running\nMainPID=4400',
      ),
    );
    await until('the banner to go', async () => (await banner()) === null);
    writeFileSync(join(scratch.dir, 'systemctl.out'), SHOW);
  }, 60_000);
});

describe('the status page under launchd', () => {
  it('shows the agents of launchctl list and restarts one with kickstart -k', async () => {
    await startPage('launchd');
    expect(recorded()[0]).toEqual(['launchctl', 'list']);
    const s = await status();
    const by = Object.fromEntries(s.services!.map((v) => [v.name, v]));
    expect(by['signal-daemon']).toMatchObject({ state: 'running', pid: 4101 });
    expect(by['inference-server']).toMatchObject({ state: 'restarting', pid: null, lastExit: { signal: 'SIGKILL' } });
    expect(by.guardian).toMatchObject({ state: 'failed', lastExit: { code: 2 } });
    expect(by['health-check']).toMatchObject({ state: 'scheduled' });
    // Not loaded (the fallback is not loaded at login): stopped.
    expect(by['inference-fallback']).toMatchObject({ state: 'stopped', pid: null });
    expect((await post('api/services/inference-server/restart', false)).status).toBe(403);
    expect((await post('api/services/inference-server/restart')).status).toBe(200);
    expect((await post('api/guardian/reset')).status).toBe(200);
    expect(acted()).toEqual([
      ['launchctl', 'kickstart', '-k', `gui/${uid}/org.vigil.inference-server`],
      ['launchctl', 'kickstart', `gui/${uid}/org.vigil.guardian`],
    ]);
  }, 60_000);
});

describe('the status page under compose', () => {
  it('shows how to restart each container instead of buttons, refuses restarts (501), and resets the guardian', async () => {
    await startPage('compose');
    const html = await (await fetch(url)).text();
    expect(html).toContain('docker compose -f docker/compose.yaml restart inference-server');
    expect(html).not.toContain('/api/services/');
    const r = await post('api/services/inference-server/restart');
    expect(r.status).toBe(501);
    expect(String(r.body.error)).toContain('docker compose -f docker/compose.yaml restart inference-server');
    expect((await post('api/guardian/reset')).status).toBe(200);
    expect(recorded()).toEqual([]);
  }, 60_000);
});

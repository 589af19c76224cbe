/// <reference lib="dom" />
/**
 * The status page in a real browser, against a real stack (`vigil start` on free loopback ports,
 * the generated model, guardian ticks of 3 s): every service shown up, no console error, axe-core
 * finds no serious or critical violation; the hour's heartbeat bar has one mark per probe logged;
 * a `kill -9` of the inference server is shown, without a reload, down and then back; a restart
 * from the page works with the token and is refused (403) without it; a cross-origin POST is
 * refused; messages per minute move when messages flow (read from the daemon's status: the stack
 * starts no metrics listener); the page reconnects by itself after the status page itself
 * restarts. It also writes the README's screenshot (.reports/status-page.png).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { exited, freePort, until } from '../../../test/support.js';
import { findProcesses } from '../../shared-types/src/node/index.js';
import { tmpDir } from '../../signal-daemon/test/helpers.js';
import { type Browser, openBrowser } from './browser.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const VIGIL = `${ROOT}packages/stack/bin/vigil.js`;
const HEALTH = `${ROOT}packages/health-check/bin/health-check.js`;
const TICK_S = 3;
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let home: { dir: string; cleanup: () => void };
let stack: ChildProcess;
let browser: Browser;
let url: string;
let daemonHttp: string;
let out = '';

const run = (argv: string[]): Promise<{ code: number; stdout: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, argv, { timeout: 60_000 }, (err, stdout) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout }),
    );
  });
const services = async (): Promise<Record<string, { state: string; pid: number | null }>> => {
  const r = await run([VIGIL, '--home', home.dir, 'status', '--json']);
  return Object.fromEntries((JSON.parse(r.stdout).services as { name: string }[]).map((s) => [s.name, s])) as never;
};
/** The state and pid the page shows for a service, read from the live DOM. */
const shown = (name: string) =>
  browser.page.evaluate((n) => {
    const row = [...document.querySelectorAll('#service-table tbody tr')].find(
      (r) => r.querySelector('th')?.textContent === n,
    );
    return row
      ? {
          state: row.querySelector('[data-state]')?.getAttribute('data-state') ?? '',
          pid: row.children[2]?.textContent ?? '',
        }
      : null;
  }, name);
const probesLogged = (from: number, to: number) =>
  readFileSync(`${home.dir}/logs/guardian.log`, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { ts: number; event: string })
    .filter((e) => ['probe_ok', 'probe_fail', 'probe_skip_busy', 'probe_loading'].includes(e.event))
    .filter((e) => e.ts >= from && e.ts <= to).length;
/** The actions the page logged, oldest first. */
const actions = (): Record<string, unknown>[] => {
  const file = `${home.dir}/logs/status-page-actions.log`;
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
};

describe('the status page in a browser', () => {
  beforeAll(async () => {
    home = tmpDir('vigil-page-');
    const page = await freePort();
    url = `http://127.0.0.1:${page}/`;
    const port = async () => `127.0.0.1:${await freePort()}`;
    daemonHttp = await port();
    stack = spawn(
      process.execPath,
      [
        VIGIL,
        'start',
        '--home',
        home.dir,
        '--daemon-http',
        daemonHttp,
        '--daemon-tcp',
        await port(),
        '--relay',
        `127.0.0.2:${await freePort('127.0.0.2')}`,
        '--inference',
        await port(),
        '--mtls',
        'off',
        '--status-page',
        `127.0.0.1:${page}`,
        '--threads',
        '1',
        '--guardian-interval',
        String(TICK_S),
        '--health-interval',
        '0',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    stack.stdout!.on('data', (d) => {
      out += d;
    });
    stack.stderr!.on('data', (d) => {
      out += d;
    });
    await until('the stack to start', () => out.includes('vigil is running'), 120_000).catch((err: Error) => {
      throw new Error(`${err.message}\n${out}`);
    });
    // One health-check run, as cron would make it, for the page's table.
    expect((await run([HEALTH, '--fix', '--quiet', '--config', `${home.dir}/health.json`])).code).toBe(0);
    browser = await openBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    if (stack && stack.exitCode === null) {
      stack.kill('SIGINT');
      const done = await Promise.race([exited(stack), new Promise((r) => setTimeout(r, 30_000))]);
      if (!done) for (const p of await findProcesses({ match: [home.dir] })) process.kill(p.pid, 'SIGKILL');
    }
    home?.cleanup();
  }, 60_000);

  it('shows every service up, with no console error and no serious accessibility violation', async () => {
    const { page } = browser;
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById('live')?.dataset.state === 'live');
    for (const name of ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'status-page']) {
      expect(await shown(name)).toMatchObject({ state: 'running', pid: expect.stringMatching(/^\d+$/) });
    }
    expect(await shown('inference-fallback')).toMatchObject({ state: 'stopped' });
    // Text, not colour alone: each state and each check says what it is.
    expect(await page.textContent('#service-table')).toContain('▲ up');
    expect(await page.textContent('#health-table')).toMatch(/signal_port ✓ ok/);
    expect(await page.textContent('#messaging')).toMatch(/local: (ready|up|serving)/);
    // Each consumer of the daemon on a line of its own: connected or away, what is held for it.
    expect(await page.textContent('#messaging')).toMatch(/sse: (▲ connected|■ away)[^;]*; (nothing held|\d+ held)/);
    expect(await page.textContent('#messaging')).not.toContain('[object');
    // Messages per minute from the daemon's own status, with no metrics listener (the stack
    // starts none): they move when messages flow (notes to self: each is sent and received).
    const perMin = () =>
      page.evaluate(() => {
        const m = /(\d+\.\d) sent, (\d+\.\d) received/.exec(document.getElementById('messaging')!.textContent ?? '');
        return m ? [Number(m[1]), Number(m[2])] : null;
      });
    await until('messages per minute', async () => (await perMin()) !== null, 20_000);
    expect(await perMin()).toEqual([0, 0]);
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`http://${daemonHttp}/api/v1/rpc`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', method: 'send', params: { noteToSelf: true, message: `m${i}` }, id: i }),
      });
      expect(((await r.json()) as { error?: unknown }).error).toBeUndefined();
    }
    await until(
      'the rates to move',
      async () => {
        const v = await perMin();
        return v !== null && v[0]! > 0 && v[1]! > 0;
      },
      20_000,
    );
    // The guardian probes: the hour's bar has one mark per probe logged up to the page's update.
    await until('two probes', () => probesLogged(0, Number.POSITIVE_INFINITY) >= 2, 60_000);
    await until(
      'the hour bar to match the log',
      async () => {
        const { marks, at } = await page.evaluate(() => ({
          marks: document.querySelectorAll('#hour-bar rect').length,
          at: Date.parse(document.querySelector('.updated')?.textContent?.replace('Updated ', '') ?? ''),
        }));
        return marks > 0 && marks === probesLogged(at / 1000 - 3600, at / 1000);
      },
      20_000,
    );
    await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const r = await (
        window as unknown as { axe: { run(o: object): Promise<{ violations: { id: string; impact: string }[] }> } }
      ).axe.run({
        resultTypes: ['violations'],
      });
      return r.violations.map((v) => ({ id: v.id, impact: v.impact }));
    });
    expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')).toEqual([]);
    mkdirSync(`${ROOT}.reports`, { recursive: true });
    await page.screenshot({ path: `${ROOT}.reports/status-page.png`, fullPage: true });
    expect(browser.errors).toEqual([]);
  }, 120_000);

  it('shows a kill -9 of the inference server, down then back, without a reload', async () => {
    const { page } = browser;
    const before = await services();
    const old = String(before['inference-server']!.pid);
    // Every state the page shows for it from now on, with when it was shown.
    await page.evaluate((pid) => {
      const seen: { state: string; pid: string; at: number }[] = [];
      (window as unknown as { seen: typeof seen }).seen = seen;
      const look = () => {
        const row = [...document.querySelectorAll('#service-table tbody tr')].find(
          (r) => r.querySelector('th')?.textContent === 'inference-server',
        );
        const state = row?.querySelector('[data-state]')?.getAttribute('data-state') ?? '';
        seen.push({ state, pid: row?.children[2]?.textContent ?? '', at: Date.now() });
      };
      new MutationObserver(look).observe(document.getElementById('main')!, { childList: true });
      document.body.dataset.oldPid = pid;
    }, old);
    const killedAt = Date.now();
    process.kill(Number(old), 'SIGKILL');
    const back = await page.waitForFunction(
      (pid) => {
        const seen = (window as unknown as { seen: { state: string; pid: string; at: number }[] }).seen;
        const down = seen.find((s) => s.state !== 'running');
        const up = down && seen.find((s) => s.at >= down.at && s.state === 'running' && s.pid !== pid);
        return down && up ? { down: down.at, up: up.at, state: down.state } : null;
      },
      old,
      { timeout: 60_000, polling: 100 },
    );
    const t = (await back.jsonValue()) as { down: number; up: number; state: string };
    process.stdout.write(
      `status page: inference-server shown ${t.state} ${t.down - killedAt} ms after kill -9, back ${t.up - killedAt} ms after\n`,
    );
    // Down and back, each within a guardian tick and 2 s of the kill (the supervisor restarts it after 1 s).
    expect(t.down - killedAt).toBeLessThanOrEqual(TICK_S * 1000 + 2000);
    expect(t.up - killedAt).toBeLessThanOrEqual(TICK_S * 1000 + 2000);
    expect(await page.textContent('#service-table')).toMatch(/killed \(SIGKILL/);
  }, 90_000);

  it('restarts a service from the page with the token, refuses it without, and refuses other origins', async () => {
    const { page } = browser;
    const token = readFileSync(`${home.dir}/state/status-page.token`, 'utf8').trim();
    const relayPid = (await services())['tcp-relay']!.pid;
    const click = async () => {
      await page.evaluate(() => {
        document.getElementById('action-result')!.textContent = '';
      });
      await page.click('#service-table form[action="/api/services/tcp-relay/restart"] button');
      await page.waitForFunction(
        () => /done|refused|no answer/.test(document.getElementById('action-result')!.textContent ?? ''),
        null,
        {
          timeout: 60_000,
        },
      );
      return page.textContent('#action-result');
    };
    await page.fill('#token', 'wrong');
    expect(await click()).toMatch(/refused \(403\)/);
    expect((await services())['tcp-relay']!.pid).toBe(relayPid);
    await page.fill('#token', token);
    expect(await click()).toMatch(/Restart tcp-relay: done/);
    expect((await services())['tcp-relay']!.pid).not.toBe(relayPid);

    // Another site (a page of its own origin) posts a text/plain form to the page, as a cross-site
    // request forgery would, with the right token in its body.
    const site = createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(
        `<form method="post" enctype="text/plain" action="${url}api/guardian/reset"><input name="x-vigil-token" value="${token}"></form><script>document.forms[0].submit()</script>`,
      );
    });
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const other = await browser.context.newPage();
    await other.goto(`http://127.0.0.1:${(site.address() as AddressInfo).port}/`);
    await until('the forged post', () => actions().some((a) => a.action === 'guardian reset'), 20_000);
    await other.close();
    site.close();
    // And a JSON POST with the token from a foreign Origin, and one through a rebinding name.
    const foreign = await fetch(`${url}api/services/tcp-relay/restart`, {
      method: 'POST',
      headers: { origin: 'http://evil.example', 'content-type': 'application/json', 'x-vigil-token': token },
      body: '{}',
    });
    expect(foreign.status).toBe(403);
    const log = actions();
    expect(log.map((a) => [a.action, a.ok, a.status ?? 200])).toEqual([
      ['restart tcp-relay', false, 403],
      ['restart tcp-relay', true, 200],
      ['guardian reset', false, 403],
      ['restart tcp-relay', false, 403],
    ]);
    expect(log[1]).toMatchObject({
      from: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      userAgent: expect.stringMatching(/Chrome/),
    });
    expect(typeof log[1]!.ts).toBe('number');
  }, 120_000);

  it('keeps updating after the status page itself restarts', async () => {
    const { page } = browser;
    const errorsBefore = browser.errors.length;
    expect((await run([VIGIL, '--home', home.dir, 'restart', 'status-page'])).code).toBe(0);
    const restartedAt = Date.now();
    await page.waitForFunction(
      (t) => Date.parse(document.querySelector('.updated')?.textContent?.replace('Updated ', '') ?? '') > t + 500,
      restartedAt,
      { timeout: 30_000 },
    );
    expect(await shown('status-page')).toMatchObject({ state: 'running' });
    // The lost connection may be reported by the browser; nothing else.
    expect(browser.errors.slice(errorsBefore).filter((e) => !/ERR_CONNECTION_REFUSED|EventSource/.test(e))).toEqual([]);
  }, 60_000);
});

/**
 * The status page's HTTP server: `GET /` (the page), `GET /events` (Server-Sent Events: the newer
 * `<main>` every half second while someone watches), `GET /api/status` (a JSON summary), the assets,
 * and the actions (actions.ts). Every request must name a loopback or IP-literal Host (guard.ts).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import { formatHostPort, type HostPort } from '@vigil/shared-types';
import { closeServer, listen, readTextOrNull, removeFile, writeFileAtomic } from '@vigil/shared-types/node';
import { type ActionsConfig, actionHandler } from './actions.js';
import { PAGE_CSS, PAGE_JS } from './assets.js';
import { Collector, type PageConfig, type Snapshot } from './collect.js';
import { checkHost } from './guard.js';
import { main, page } from './render.js';
import { json, SECURITY_HEADERS, send } from './respond.js';
import { summary } from './summary.js';

export interface StatusPageConfig extends PageConfig, ActionsConfig {
  readonly listen: HostPort;
  /** Where the page's address is published (`vigil status` reads it); removed on close. */
  readonly addressFile: string;
}

export interface StatusPage {
  readonly address: HostPort;
  readonly url: string;
  close(): Promise<void>;
}

const MAX_STREAMS = 16;
/** A refresh every half second while a page is open: a restart's 1 s delay is always seen. */
const TICK_MS = 500;

/** The token of the home: read, or made (32 random bytes, hex, 0600) when missing. */
export function ensureToken(file: string): string {
  const have = readTextOrNull(file)?.trim();
  if (have) return have;
  const token = randomBytes(32).toString('hex');
  writeFileAtomic(file, `${token}\n`);
  return token;
}

const sseData = (html: string) =>
  html
    .split('\n')
    .map((l) => `data: ${l}`)
    .join('\n');

export async function startStatusPage(config: StatusPageConfig): Promise<StatusPage> {
  const collector = new Collector(config);
  ensureToken(config.tokenFile);
  // The history so far is read, and a page made once, before the address is published: the first
  // visitor does not wait for a week of log to be read or for the code to warm up.
  page(await collector.snapshot());
  const streams = new Set<ServerResponse>();
  let last: Snapshot | null = null;
  let pending: Promise<Snapshot> | null = null;
  const fresh = (maxAgeMs: number): Promise<Snapshot> => {
    if (last && Date.now() - last.at <= maxAgeMs) return Promise.resolve(last);
    pending ??= collector.snapshot().then((s) => {
      last = s;
      pending = null;
      return s;
    });
    return pending;
  };
  // The last <main> sent: a refresh that changed nothing sends nothing.
  let sent = '';
  const push = (s: Snapshot, to?: ServerResponse) => {
    const html = main(s);
    if (!to && html === sent) return;
    const frame = `event: main\n${sseData(html)}\n\n`;
    if (to) return void to.write(frame);
    sent = html;
    for (const res of streams) res.write(frame);
  };
  const timer = setInterval(() => {
    if (streams.size > 0 && !pending) void fresh(TICK_MS / 2).then((s) => push(s));
  }, TICK_MS);

  const act = actionHandler(config);

  function events(res: ServerResponse): void {
    if (streams.size >= MAX_STREAMS) return void json(res, 503, { ok: false, error: 'too many live pages open' });
    res.writeHead(200, { ...SECURITY_HEADERS, 'content-type': 'text/event-stream; charset=utf-8' });
    res.write('retry: 1000\n\n');
    streams.add(res);
    res.on('close', () => streams.delete(res));
    void fresh(TICK_MS / 2).then((s) => push(s, res));
  }

  const server = createServer((req, res) => {
    const refused = checkHost(req.headers, config.listen.host);
    if (refused) return json(res, refused.status, { ok: false, error: refused.error });
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'POST') {
      req.resume(); // the body says nothing an action needs
      return void act(req, res, path).catch((err: Error) => json(res, 500, { ok: false, error: err.message }));
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { ok: false, error: 'GET or POST' });
    if (path === '/assets/page.css') return send(res, 200, 'text/css; charset=utf-8', PAGE_CSS);
    if (path === '/assets/page.js') return send(res, 200, 'text/javascript; charset=utf-8', PAGE_JS);
    if (path === '/events') return events(res);
    if (path === '/' || path === '/api/status') {
      return void fresh(250).then(
        (s) => (path === '/' ? send(res, 200, 'text/html; charset=utf-8', page(s)) : json(res, 200, summary(s))),
        (err: Error) => json(res, 500, { ok: false, error: err.message }),
      );
    }
    return json(res, 404, { ok: false, error: `nothing at ${path}` });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  const address = await listen(server, config.listen, 'the status page');
  const url = `http://${formatHostPort(address)}/`;
  writeFileAtomic(config.addressFile, `${JSON.stringify({ url, pid: process.pid })}\n`);
  return {
    address,
    url,
    async close() {
      clearInterval(timer);
      for (const res of streams) res.end();
      removeFile(config.addressFile);
      await closeServer(server);
    },
  };
}

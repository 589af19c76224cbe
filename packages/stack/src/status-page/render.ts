/**
 * The page as server-rendered HTML, readable with JavaScript off: the stack's services, the
 * guardian (with its bars and chart), the health-check runs, messaging and inference. `main()` is
 * also what the live updates replace (the page's script swaps `<main>` for the newer one).
 */
import type { ConsumerStatus, HealthReport } from '@vigil/shared-types';
import { binOf, NODE } from '../paths.js';
import { duration } from '../status.js';
import { dayBar, esc, hourBar, latencyChart } from './charts.js';
import type { Snapshot } from './collect.js';
import { howToRestart, labelOf, type PageService, type ServicesView, unitOf } from './managers.js';
import { metricSum } from './probe.js';

/** What an exit means (the README's exit-code table). */
export function exitMeaning(code: number | null, signal: string | null): string {
  if (signal === 'SIGKILL') return 'killed (SIGKILL: kill -9, or out of memory)';
  if (signal) return `ended by ${signal}`;
  if (code === 0) return 'exit 0: ended normally';
  if (code === 1) return 'exit 1: a runtime failure (its log says which)';
  if (code === 2) return 'exit 2: manual intervention required (not restarted)';
  if (code === 78) return 'exit 78: bad usage or configuration (not restarted)';
  return `exit ${code}`;
}

const STATE_TEXT: Readonly<Record<PageService['state'], string>> = {
  running: '▲ up',
  stopped: '■ stopped',
  restarting: '↻ restarting',
  failed: '✕ failed',
  scheduled: '◷ scheduled',
};

const ago = (ts: number | null | undefined, now: number) =>
  typeof ts === 'number' && ts > 0 ? `${duration(now / 1000 - ts)} ago` : 'never';
const fixed = (v: number | null, digits = 1) => (v === null ? '–' : v.toFixed(digits));
/** A table row; `head`, when given, is its first cell as a row header. */
const row = (cells: readonly string[], head?: string) =>
  `<tr>${head === undefined ? '' : `<th scope="row">${head}</th>`}${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`;
const table = (caption: string, head: readonly string[], rows: readonly string[], id: string) =>
  `<table id="${id}"><caption>${caption}</caption><thead><tr>${head.map((h) => `<th scope="col">${h}</th>`).join('')}</tr></thead><tbody>${rows.join('')}</tbody></table>`;
const dl = (pairs: readonly [string, string][]) =>
  `<dl>${pairs.map(([k, v]) => `<div><dt>${k}</dt><dd>${v}</dd></div>`).join('')}</dl>`;

function restartButton(name: string, state: PageService['state']): string {
  const verb = state === 'running' || state === 'restarting' ? 'Restart' : state === 'scheduled' ? 'Run' : 'Start';
  return `<form method="post" action="/api/services/${esc(name)}/restart" class="action"><button type="submit">${verb} ${esc(name)}</button></form>`;
}

/** Who runs the services, in a sentence. */
function managedBy(v: ServicesView, now: number): string {
  if (v.by === 'supervisor' && 'supervisor' in v) {
    const sup = v.supervisor;
    return `Supervisor pid ${sup.pid}, up ${duration((now - Date.parse(sup.startedAt)) / 1000)}, home <code>${esc(sup.home)}</code>.`;
  }
  if (v.by === 'systemd')
    return `systemd user units (<code>${esc(unitOf('NAME'))}</code>); a restart is <code>systemctl --user restart</code>.`;
  return `launchd agents (<code>${esc(labelOf('NAME'))}</code>); a restart is <code>launchctl kickstart -k</code>.`;
}

/** Where the page cannot see or restart the services: what to run instead. */
function unmanaged(by: 'compose' | 'none'): string {
  if (by === 'none') {
    return '<p>This page was started with <code>--restart-with none</code>: it does not read or restart the services; the sections below show what they write and serve.</p>';
  }
  const names = ['signal-daemon', 'tcp-relay', 'inference-server', 'guardian', 'health-check', 'status-page'];
  const rows = names.map((n) => row([`<code>${esc(howToRestart('compose', n))}</code>`], esc(n)));
  return `<p>The services are containers of the compose project; this page's container cannot see or restart them (it has no Docker socket, on purpose). Their state: <code>docker compose -f docker/compose.yaml ps</code>. To restart one, on the host:</p>${table('Restarting a container', ['service', 'command'], rows, 'service-commands')}`;
}

function services(s: Snapshot): string {
  const v = s.services;
  const head = '<section id="services" aria-labelledby="h-services"><h2 id="h-services">Services</h2>';
  if ('error' in v) {
    const who =
      v.by === 'supervisor'
        ? `No supervisor answers: ${esc(v.error)}.</p><p>Under <code>vigil start</code> the stack is stopped or starting; the sections below still show what the services write and serve.`
        : `The service manager could not be asked: ${esc(v.error)}.`;
    return `${head}<p class="state-failed">✕ ${who}</p></section>`;
  }
  if (!('list' in v)) return `${head}${unmanaged(v.by as 'compose' | 'none')}</section>`;
  const now = s.at;
  const rows = v.list.map((x) =>
    row(
      [
        `<span class="state state-${x.state}" data-state="${x.state}">${STATE_TEXT[x.state]}</span>`,
        String(x.pid ?? '–'),
        x.startedAt
          ? duration((now - Date.parse(x.startedAt)) / 1000)
          : x.restartAt
            ? `restart in ${duration(Math.max(0, (Date.parse(x.restartAt) - now) / 1000))}`
            : '–',
        String(x.restarts ?? '–'),
        x.lastExit
          ? `${esc(exitMeaning(x.lastExit.code, x.lastExit.signal))}${x.lastExit.at ? ` at ${esc(x.lastExit.at)}` : ''}`
          : '–',
        restartButton(x.name, x.state),
      ],
      esc(x.name),
    ),
  );
  return `${head}<p>${managedBy(v, now)}</p>${table('Every service of the stack', ['service', 'state', 'pid', 'uptime', 'restarts', 'last exit', 'action'], rows, 'service-table')}</section>`;
}

/** Why a person is needed, or null: the guardian exited 2, or its state or log says it is alerting. */
function needsPerson(s: Snapshot): { why: string; fallback: boolean } | null {
  const g = s.guardian;
  const alerting = g.machine?.alerting as { reason?: string; detail?: string } | null | undefined;
  const svc = 'list' in s.services ? s.services.list.find((v) => v.name === 'guardian') : undefined;
  const exited2 = svc?.state === 'failed' && svc.lastExit?.code === 2;
  const logged = g.history.needsPerson;
  if (!alerting && !exited2 && !logged) return null;
  const why = alerting
    ? `${alerting.reason ?? 'alerting'}${alerting.detail ? `: ${alerting.detail}` : ''}`
    : logged
      ? `${String(logged.event)}${logged.detail ? `: ${String(logged.detail)}` : ''}`
      : 'the guardian exited 2 (manual intervention required)';
  return { why, fallback: g.machine?.mode === 'fallback' || g.history.fallback };
}

function guardianBanner(s: Snapshot): string {
  const need = needsPerson(s);
  if (!need) return '';
  const cfg = s.guardian.configFile;
  const verb = need.fallback ? 'restore' : 'reset';
  const v = s.services;
  const cmd =
    v.by === 'compose'
      ? `docker compose -f docker/compose.yaml run --rm guardian ${verb} --config /etc/vigil/guardian.json`
      : `${NODE} ${binOf('guardian')} ${verb} --config ${cfg}`;
  const then =
    v.by === 'supervisor' && 'supervisor' in v
      ? `vigil --home ${v.supervisor.home} start guardian`
      : v.by === 'systemd'
        ? `systemctl --user restart ${unitOf('guardian')}`
        : null;
  return `<div class="banner" role="alert" id="guardian-banner"><h2>⚠ The guardian needs you</h2><p>${esc(need.why)}</p><p>Fix the cause, then run (or use the guardian ${verb} button below, with the token):</p><pre><code>${esc(cmd)}</code></pre>${then ? `<p>then start the guardian again (the button does): <code>${esc(then)}</code></p>` : ''}</div>`;
}

function guardian(s: Snapshot): string {
  const g = s.guardian;
  const m = g.machine;
  const now = s.at / 1000;
  const restarts = Array.isArray(m?.restarts)
    ? (m.restarts as number[]).filter((t) => t > now - g.limits.restartWindowS)
    : [];
  const causes = m?.causes && typeof m.causes === 'object' ? Object.keys(m.causes) : [];
  const alerting = (m?.alerting as { reason?: string } | null | undefined)?.reason ?? null;
  const mode = typeof m?.mode === 'string' ? m.mode : g.history.fallback ? 'fallback' : 'primary';
  const last = g.history.last;
  const pairs: [string, string][] = [
    ['agent', `${esc(mode)}${g.history.agent ? ` (${esc(g.history.agent)})` : ''}`],
    ['consecutive failures', String(typeof m?.consecutive === 'number' ? m.consecutive : g.history.consecutive)],
    [
      'restart window',
      `${restarts.length} of ${g.limits.maxRestarts} restarts in the last ${duration(g.limits.restartWindowS)}`,
    ],
    ['rate limit', alerting === 'rate_limit' ? '✕ reached: no more restarts until reset' : '✓ not reached'],
    [
      'circuit',
      alerting === 'circuit_open'
        ? `✕ open (${causes.length} root causes): remediation halted`
        : `✓ closed (${causes.length} of ${g.limits.circuitCauses} root causes in ${duration(g.limits.circuitWindowS)}${causes.length ? `: ${esc(causes.join(', '))}` : ''})`,
    ],
    ['last event', last ? `${esc(last.event)} ${ago(last.ts as number, s.at)}` : 'none yet'],
  ];
  const total = [...g.history.counts].map(([k, v]) => `${esc(k)} ${v}`).join(', ');
  const actions = `<form method="post" action="/api/guardian/reset" class="action"><button type="submit">guardian reset</button></form><form method="post" action="/api/guardian/restore" class="action"><button type="submit">guardian restore</button></form>`;
  return `<section id="guardian" aria-labelledby="h-guardian"><h2 id="h-guardian">Guardian</h2>${dl(pairs)}<h3>Heartbeat, last hour</h3>${hourBar(g.history, now)}<h3>Heartbeat, last 24 hours</h3>${dayBar(g.history, now)}<h3>Probe latency</h3>${latencyChart(g.history, now)}<p class="counts">Events since the log began: ${total || 'none'}</p><div class="actions">${actions}</div></section>`;
}

const CHECK_TEXT: Readonly<Record<string, string>> = {
  ok: '✓ ok',
  healed: '↻ healed',
  failed: '✕ failed',
  skipped: '– skipped',
};
const EXIT_TEXT = ['0 healthy', '1 repaired', '2 needs you', '3 could not run'];

function healthRow(r: HealthReport): string {
  const checks = r.checks
    .map(
      (c) =>
        `<span class="check check-${esc(c.status)}" title="${esc(c.detail)}">${esc(c.name)} ${CHECK_TEXT[c.status] ?? esc(c.status)}</span>`,
    )
    .join(' ');
  const repairs = r.checks
    .filter((c) => c.fix)
    .map((c) => `${esc(c.name)}: ${esc(c.fix!.action)} ${c.fix!.ok ? '✓ done' : '✕ failed'}`)
    .join('; ');
  return row([
    esc(new Date(r.ts * 1000).toISOString().replace('T', ' ').slice(0, 19)),
    checks,
    repairs || '–',
    esc(EXIT_TEXT[r.exitCode] ?? String(r.exitCode)),
  ]);
}

function health(s: Snapshot): string {
  const h = s.health;
  const rows = h.runs.slice(-20).reverse().map(healthRow);
  const byExit = [...h.byExit]
    .sort(([a], [b]) => a - b)
    .map(([k, v]) => `${esc(EXIT_TEXT[k] ?? k)}: ${v}`)
    .join(', ');
  return `<section id="health" aria-labelledby="h-health"><h2 id="h-health">Health check</h2><p>${h.total} runs logged${byExit ? ` (${byExit})` : ''}; the last ${rows.length} below, newest first.</p>${table('Health-check runs', ['time (UTC)', 'checks', 'repairs', 'exit'], rows, 'health-table')}</section>`;
}

/** One consumer of the daemon's status: connected or away (since when), and what is held for it. */
function consumerLine(c: Partial<ConsumerStatus>, now: number): string {
  const conns = c.connections ?? 0;
  const state = c.connected
    ? `▲ connected (${conns} connection${conns === 1 ? '' : 's'})`
    : `■ away${typeof c.lastSeenAt === 'number' ? `, last seen ${ago(c.lastSeenAt / 1000, now)}` : ', never seen'}`;
  const held = c.held
    ? `${c.held} held${typeof c.oldestHeldAgeS === 'number' ? `, oldest ${duration(c.oldestHeldAgeS)}` : ''}`
    : 'nothing held';
  return `<li><strong>${esc(c.name ?? '?')}</strong>: ${state}; ${held}</li>`;
}

/** The daemon's `consumers`: its SSE streams and TCP connections, then one line per consumer. */
function consumers(c: unknown, now: number): string {
  if (!c || typeof c !== 'object') return '–';
  const v = c as { sse?: unknown; tcp?: unknown; list?: unknown };
  const open = `${Number(v.sse ?? 0)} SSE stream${v.sse === 1 ? '' : 's'}, ${Number(v.tcp ?? 0)} TCP connection${v.tcp === 1 ? '' : 's'}`;
  const list = Array.isArray(v.list) ? v.list : [];
  return `${open}${list.length ? `<ul class="consumers">${list.map((x) => consumerLine(x as Partial<ConsumerStatus>, now)).join('')}</ul>` : ''}`;
}

function messaging(s: Snapshot): string {
  const m = s.messaging;
  const c = m.check;
  const backend = c?.backend as { kind?: string; state?: string } | undefined;
  const perMin = m.counted
    ? `${fixed(m.sentPerMin)} sent, ${fixed(m.receivedPerMin)} received`
    : m.error
      ? '–'
      : '– (this daemon reports no message counters: give the status page its --metrics listener, --daemon-metrics)';
  const pairs: [string, string][] = [
    ['daemon', m.error ? `✕ ${esc(m.error)}` : '✓ answering'],
    ['backend', backend ? `${esc(backend.kind ?? '?')}: ${esc(backend.state ?? '?')}` : '–'],
    ['account', esc(c?.account ?? '–')],
    ['consumers', consumers(c?.consumers, s.at)],
    ['messages per minute', perMin],
    ['last outbound send', ago(typeof c?.lastOutboundSendAt === 'number' ? c.lastOutboundSendAt / 1000 : null, s.at)],
    [
      'last inbound message',
      ago(typeof c?.lastInboundMessageAt === 'number' ? c.lastInboundMessageAt / 1000 : null, s.at),
    ],
  ];
  return `<section id="messaging" aria-labelledby="h-messaging"><h2 id="h-messaging">Messaging</h2>${dl(pairs)}</section>`;
}

function inference(s: Snapshot): string {
  const i = s.inference;
  const lines = i.metrics ?? [];
  const sum = (name: string) => metricSum(lines, name);
  const cachedName = lines.find((l) => /cached/.test(l.name))?.name;
  const errors = lines
    .filter((l) => l.name === 'inference_requests_total' && Number(l.labels.status) >= 400)
    .map((l) => `${esc(l.labels.route)} ${esc(l.labels.status)}: ${l.value}`);
  const state = lines.find((l) => l.name === 'inference_model_state' && l.value === 1)?.labels.state;
  const pairs: [string, string][] = [
    ['server', i.error ? `✕ ${esc(i.error)}` : `✓ ${esc(state ?? 'answering')}`],
    ['requests per second', fixed(i.requestsPerS, 2)],
    ['tokens per second', fixed(i.tokensPerS, 1)],
    ['queue depth', String(sum('inference_queue_depth') ?? '–')],
    ['slots busy', `${sum('inference_busy_sequences') ?? '–'} of ${sum('inference_sequences') ?? '–'}`],
    ...(cachedName ? [['cached prompt tokens', String(sum(cachedName))] as [string, string]] : []),
    ['error answers', errors.length ? errors.join(', ') : 'none'],
  ];
  const last = i.lastErrors.map(
    (e) =>
      `<li>${esc(ago(typeof e.ts === 'number' ? e.ts : null, s.at))}: ${esc(String(e.msg ?? e.message ?? JSON.stringify(e)).slice(0, 200))}</li>`,
  );
  return `<section id="inference" aria-labelledby="h-inference"><h2 id="h-inference">Inference</h2>${dl(pairs)}<h3>Last errors and warnings in its log</h3>${last.length ? `<ul>${last.join('')}</ul>` : '<p>none</p>'}</section>`;
}

/** The part of the page the live updates replace. */
export function main(s: Snapshot): string {
  return `${guardianBanner(s)}${services(s)}${guardian(s)}${health(s)}${messaging(s)}${inference(s)}<p class="updated">Updated ${esc(new Date(s.at).toISOString())}</p>`;
}

/** The whole page. */
export function page(s: Snapshot): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>vigil status</title><link rel="stylesheet" href="/assets/page.css"><script src="/assets/page.js" defer></script></head><body><header><h1>vigil status</h1><p id="live" role="status" aria-live="polite">Live updates need JavaScript; this page shows the state when it was loaded.</p><form id="token-form" class="token"><label for="token">Action token</label> <input id="token" type="password" autocomplete="off" placeholder="contents of the token file"> <span id="action-result" role="status" aria-live="polite"></span></form></header><main id="main">${main(s)}</main><footer><p>Served by vigil on loopback. Actions need the token in <code>state/status-page.token</code> under the stack's home.</p></footer></body></html>`;
}

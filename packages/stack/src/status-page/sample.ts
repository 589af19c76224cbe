/**
 * A home with a long history, for the benchmark and the tests of the status page: the guardian's
 * log of `days` at one probe every `tickS` (mostly ok, some failures with their restarts, busy
 * skips, a fallback and its restore) and `healthRuns` health-check reports, with the
 * configurations that point the page at them (services at addresses where nothing listens).
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { HEALTH_CHECKS } from '@vigil/shared-types';
import { ensureDir } from '@vigil/shared-types/node';
import { homePaths } from '../paths.js';

export interface SampleHistory {
  readonly events: number;
  readonly probes: number;
  readonly healthRuns: number;
}

export function writeSampleHistory(
  home: string,
  opts: { days: number; tickS: number; healthRuns: number; now?: number; closedPort: number },
): SampleHistory {
  const paths = homePaths(home);
  for (const d of paths.dirs) ensureDir(d);
  const now = opts.now ?? Date.now() / 1000;
  const nowhere = `127.0.0.1:${opts.closedPort}`;
  const guardianLog = paths.log('guardian');
  writeFileSync(
    paths.guardianConfig,
    JSON.stringify({
      logFile: guardianLog,
      stateFile: paths.guardianState,
      lockFile: paths.fallbackLock,
      primary: {
        agent: 'inference-server',
        http: nowhere,
        model: 'vigil',
        service: { kind: 'systemd', unit: 'vigil-inference-server.service', user: true },
      },
    }),
  );
  writeFileSync(paths.healthConfig, JSON.stringify({ daemon: { http: nowhere }, healthLog: paths.healthLog }));
  const lines: string[] = [];
  let events = 0;
  let probes = 0;
  const start = now - opts.days * 86_400;
  for (let i = 0, ts = start; ts < now; i++, ts += opts.tickS) {
    const e = (event: string, fields: object) => {
      lines.push(JSON.stringify({ ts: Number(ts.toFixed(3)), level: 'info', event, ...fields }));
      events++;
    };
    probes++;
    if (i % 997 === 500) {
      e('probe_fail', { probe_ms: 20_000, consecutive: 1, snippet: 'timed out' });
    } else if (i % 997 === 501) {
      e('probe_fail', { probe_ms: 20_000, consecutive: 2, snippet: 'timed out' });
      e('restarting', { action: 'kickstart', agent: 'inference-server' });
      e('restart_requested', { rc: 0 });
    } else if (i % 50 === 7) e('probe_skip_busy', { recent_success_age_s: 4.2 });
    else e('probe_ok', { probe_ms: 40 + ((i * 7919) % 60), agent: 'inference-server' });
    if (i === 20_000) e('fallback_activated', {});
    if (i === 20_100) e('restored', { agent: 'inference-server' });
    if (lines.length >= 5000) appendFileSync(guardianLog, `${lines.splice(0).join('\n')}\n`);
  }
  appendFileSync(guardianLog, lines.length ? `${lines.join('\n')}\n` : '');
  const reports: string[] = [];
  for (let r = 0; r < opts.healthRuns; r++) {
    const healed = r % 40 === 3;
    reports.push(
      JSON.stringify({
        ts: Number((now - (opts.healthRuns - r) * 300).toFixed(3)),
        fix: true,
        checks: HEALTH_CHECKS.map((name, k) => ({
          name,
          status: healed && k === 0 ? 'healed' : k >= 3 && k <= 5 ? 'skipped' : 'ok',
          detail: healed && k === 0 ? 'restarted the daemon' : `${name} detail`,
          ...(healed && k === 0 ? { fix: { action: 'restart signal-daemon', ok: true, detail: 'rc 0' } } : {}),
          durationMs: 3,
        })),
        durationMs: 40,
        exitCode: healed ? 1 : 0,
      }),
    );
  }
  writeFileSync(paths.healthLog, `${reports.join('\n')}\n`);
  return { events, probes, healthRuns: opts.healthRuns };
}

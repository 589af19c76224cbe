/**
 * What the guardian does when its state cannot be used as it is: a state file that a power loss
 * left empty or garbled is moved aside (kept for a person) and replaced by a fresh state, whose
 * alerting state comes back from the event log when that says a person was needed; a state lock
 * held by a live process that is not a guardian (its pid reused after a crash) is taken over.
 */
import { readFileSync, renameSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { listProcesses, pidAlive, removeFile, runsProgram } from '@vigil/shared-types/node';
import type { Alerting, AlertingReason } from './machine.js';

const ALERTING_REASONS: ReadonlySet<string> = new Set([
  'rate_limit',
  'circuit_open',
  'fallback_unavailable',
  'fallback_failed',
]);
/** Events after which a person is no longer needed. */
const CLEARING = new Set(['reset', 'restored']);
const TAIL_BYTES = 256 * 1024;

/** Moves a damaged state file aside (`FILE.damaged-<ISO time>`); returns the new path, or null when it could not. */
export function moveAside(path: string, now = new Date()): string | null {
  const aside = `${path}.damaged-${now.toISOString().replace(/[:.]/g, '-')}`;
  try {
    renameSync(path, aside);
    return aside;
  } catch {
    return null;
  }
}

/**
 * The alerting state as the event log's tail says: the last event that asked for a person, unless
 * a `reset` or `restored` came after it. Null when it says none (or there is no log to read).
 */
export async function alertingFromEvents(logFile: string | undefined): Promise<Alerting | null> {
  if (!logFile) return null;
  let text: string;
  try {
    const fh = await open(logFile, 'r');
    try {
      const { size } = await fh.stat();
      const start = Math.max(0, size - TAIL_BYTES);
      const buf = Buffer.alloc(size - start);
      await fh.read(buf, 0, buf.length, start);
      text = buf.toString('utf8');
    } finally {
      await fh.close();
    }
  } catch {
    return null;
  }
  let found: Alerting | null = null;
  for (const line of text.split('\n')) {
    let e: { ts?: unknown; event?: unknown; detail?: unknown };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    if (typeof e !== 'object' || e === null || typeof e.event !== 'string') continue;
    const ts = typeof e.ts === 'number' && Number.isFinite(e.ts) && e.ts >= 0 && e.ts < 8.64e12 ? e.ts : null;
    if (CLEARING.has(e.event)) found = null;
    else if (ALERTING_REASONS.has(e.event) && ts !== null) {
      const detail = typeof e.detail === 'string' ? e.detail : `${e.event} (from the event log)`;
      found = { reason: e.event as AlertingReason, since: ts, detail, announced: true };
    } else if (e.event === 'alerting' && found === null && typeof e.detail === 'string') {
      // "rate_limit since 2025-…: …": a guardian started in that state said so.
      const reason = /^(\w+) since (\S+): ([\s\S]*)$/.exec(e.detail);
      const since = reason ? Date.parse(reason[2]!) / 1000 : Number.NaN;
      if (reason && ALERTING_REASONS.has(reason[1]!) && Number.isFinite(since)) {
        found = { reason: reason[1] as AlertingReason, since, detail: reason[3]!, announced: true };
      }
    }
  }
  return found;
}

/**
 * Removes the state lock when its holder is alive but not a guardian (a pid reused after the
 * guardian that wrote it died); returns what it found, for a message, or null when it left the lock.
 */
export async function clearForeignLock(lockPath: string): Promise<string | null> {
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(lockPath, 'utf8'), 10);
    statSync(lockPath);
  } catch {
    return null;
  }
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !pidAlive(pid)) return null;
  const holder = (await listProcesses()).find((p) => p.pid === pid);
  if (holder === undefined || runsProgram(holder.argv, 'guardian')) return null;
  // Read again: the lock may have changed hands meanwhile.
  try {
    if (Number.parseInt(readFileSync(lockPath, 'utf8'), 10) !== pid) return null;
  } catch {
    return null;
  }
  removeFile(lockPath);
  return `pid ${pid} (${holder.command.slice(0, 120)}) is not a guardian: the lock was left by a guardian that died and its pid was reused`;
}

/**
 * What a tick observes besides its probes: the lock file, a fatal pattern in the new lines of the
 * primary's log, and the latest success in either access log that was not one of our own probes.
 */
import { findFatalPattern, isSuccessLogLine } from '@vigil/shared-types';
import { fileExists } from '@vigil/shared-types/node';
import type { GuardianConfig } from './config.js';
import { readNewLines } from './logreader.js';
import type { FatalFinding, Observation, Target } from './machine.js';
import type { StateFileData } from './state-file.js';

const LINE_CHARS = 500;
const nowS = () => Date.now() / 1000;

export async function observeTick(c: GuardianConfig, data: StateFileData): Promise<Observation> {
  const now = nowS();
  const lock = fileExists(c.lockFile);
  let fatal: FatalFinding | null = null;
  if (c.primary.log) {
    const r = await readLog(c.primary.log, data, 'primary');
    for (const line of r.lines) {
      // A log seen for the first time: only what it said in the last recentLogS counts.
      if (r.first && line.at < now - c.recentLogS) continue;
      const pattern = findFatalPattern(line.text);
      if (pattern !== null) {
        fatal = { pattern, line: excerptLine(line.text) };
        break;
      }
    }
  }
  // Each completion of ours accounts for one success line (timestamps may be whole seconds).
  const own = [...data.ownProbes];
  const mine = (at: number, target: Target) => {
    const i = own.findIndex(([start, end, t]) => t === target && at >= start - 1 && at <= end + 1);
    if (i >= 0) own.splice(i, 1);
    return i >= 0;
  };
  const access: [Target, string | undefined][] = [
    ['primary', c.primary.accessLog],
    ['fallback', c.fallback?.accessLog],
  ];
  for (const [target, path] of access) {
    if (!path) continue;
    const r = await readLog(path, data, `access:${target}`);
    for (const line of r.lines) {
      if (!isSuccessLogLine(line.text) || mine(line.at, target)) continue;
      if (data.lastSuccessAt === null || line.at > data.lastSuccessAt) data.lastSuccessAt = line.at;
    }
  }
  data.ownProbes = own.filter(([, end]) => now - end < Math.max(c.busyWindowS, c.intervalS) + 60);
  return { type: 'tick', lock, fatal, lastSuccessAt: data.lastSuccessAt };
}

async function readLog(path: string, data: StateFileData, key: string) {
  try {
    const r = await readNewLines(path, data.logs[key] ?? null);
    data.logs[key] = r.position;
    return r;
  } catch (err) {
    // Unreadable (permissions): nothing seen this time; the probes still run.
    process.stderr.write(`guardian: cannot read ${path}: ${(err as Error).message}\n`);
    return { lines: [], first: false };
  }
}

function excerptLine(text: string): string {
  const one = text.trim();
  return one.length > LINE_CHARS ? `${one.slice(0, LINE_CHARS - 1)}…` : one;
}

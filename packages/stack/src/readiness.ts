/** Telling that a service just started is up: an HTTP 200 on its path, or a line in its log. */
import { closeSync, openSync, readSync } from 'node:fs';
import type { HostPort } from '@vigil/shared-types';
import { sleep, Wire } from '@vigil/shared-types/light';
import type { Readiness } from './services.js';

/** Whether GET `path` answers 200 (one connection, one request, at most a second; 64 KiB of the answer read). */
export async function httpOk(addr: HostPort, path: string): Promise<boolean> {
  try {
    const wire = new Wire({ address: addr }, { timeoutMs: 1000, maxBytes: 64 << 10, overflow: 'truncate' });
    return (await wire.request({ path })).status === 200;
  } catch {
    return false;
  }
}

/** Whether what was written to the file from byte `from` on matches. */
export function fileHas(file: string, from: number, pattern: RegExp): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return false;
  }
  try {
    const chunks: Buffer[] = [];
    const buf = Buffer.alloc(64 * 1024);
    for (let pos = from; ; ) {
      const n = readSync(fd, buf, 0, buf.length, pos);
      if (n <= 0) break;
      chunks.push(Buffer.from(buf.subarray(0, n)));
      pos += n;
    }
    return pattern.test(Buffer.concat(chunks).toString('utf8'));
  } finally {
    closeSync(fd);
  }
}

export interface ReadyProbe {
  readonly ready: Readiness;
  /** The service's log, and where the running process started writing to it. */
  readonly log: string;
  readonly logStart: number;
}

export function isReady(probe: ReadyProbe): Promise<boolean> {
  const r = probe.ready;
  if (r.kind === 'http') return httpOk(r.addr, r.path);
  if (r.kind === 'log') return Promise.resolve(fileHas(probe.log, probe.logStart, r.pattern));
  return Promise.resolve(true);
}

/** Polls until ready (true), the process is gone or the time is up (false). */
export async function waitReady(probe: () => ReadyProbe | null, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const p = probe();
    if (!p) return false;
    if (await isReady(p)) return true;
    await sleep(100);
  }
  return false;
}

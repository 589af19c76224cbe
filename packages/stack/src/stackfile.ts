/**
 * `run/stack.json`: the running supervisor's pid and, for each service it runs, the pid and the
 * command line (a pid is that service only while it runs that command: pids are reused). Read by
 * the next start to stop what a killed supervisor left; removed on a clean stop.
 */
import { readTextOrNull, removeFile, writeFileAtomic } from '@vigil/shared-types/light';

export interface StackFile {
  readonly pid: number;
  readonly home: string;
  /** The supervisor's stop timeout: how long a `vigil stop|restart SERVICE` may take. */
  readonly stopTimeoutMs?: number;
  readonly services: Readonly<Record<string, { readonly pid: number; readonly command: string }>>;
}

/** The file's content, or null when it is absent or unreadable (a torn write of an old version). */
export function readStackFile(path: string): StackFile | null {
  let value: unknown;
  try {
    value = JSON.parse(readTextOrNull(path) ?? 'null');
  } catch {
    return null;
  }
  const v = value as Partial<StackFile> | null;
  if (!v || typeof v !== 'object' || typeof v.pid !== 'number') return null;
  const services: Record<string, { pid: number; command: string }> = {};
  for (const [name, s] of Object.entries(v.services ?? {})) {
    if (s && typeof s.pid === 'number' && typeof s.command === 'string')
      services[name] = { pid: s.pid, command: s.command };
  }
  const stopTimeoutMs = typeof v.stopTimeoutMs === 'number' ? v.stopTimeoutMs : undefined;
  return {
    pid: v.pid,
    home: String(v.home ?? ''),
    ...(stopTimeoutMs === undefined ? {} : { stopTimeoutMs }),
    services,
  };
}

export function writeStackFile(path: string, content: StackFile): void {
  writeFileAtomic(path, `${JSON.stringify(content)}\n`);
}

export function removeStackFile(path: string): void {
  removeFile(path);
}

/**
 * forceflow_port: the flow service's configuration points at the daemon's port; with --fix, the
 * value is patched in the form it had (after a backup, atomically) and the flow service restarted.
 */
import { readFileSync } from 'node:fs';
import { runServiceAction, writeFileAtomic } from '@vigil/shared-types/node';
import { type Check, ok, skipped } from './check.js';

/** Reads a dotted key ("channels.signal.port") of a JSON object; the parent and the last key. */
function locate(root: unknown, key: string): { parent: Record<string, unknown>; last: string } | null {
  const parts = key.split('.');
  let node = root;
  for (const p of parts.slice(0, -1)) {
    if (typeof node !== 'object' || node === null) return null;
    node = (node as Record<string, unknown>)[p];
  }
  if (typeof node !== 'object' || node === null) return null;
  return { parent: node as Record<string, unknown>, last: parts.at(-1)! };
}

/** The port a value names: a number, "8080", "127.0.0.1:8080" or a URL. */
export function portOf(value: unknown): number | null {
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  if (typeof value !== 'string') return null;
  if (/^\d+$/.test(value)) return Number(value);
  const m = /:(\d+)(?:[/?#]|$)/.exec(value);
  return m ? Number(m[1]) : null;
}

/** The same value, pointing at another port, in the form it had. */
export function withPort(value: unknown, port: number): unknown {
  if (typeof value === 'number') return port;
  if (typeof value === 'string' && /^\d+$/.test(value)) return String(port);
  return String(value).replace(/:(\d+)(?=[/?#]|$)/, `:${port}`);
}

export const forceflowPort: Check = {
  name: 'forceflow_port',
  async run(ctx) {
    const f = ctx.config.flowConfig;
    if (!f) return skipped('no flow configuration file configured');
    const want = ctx.config.daemon.http.port;
    let text: string;
    let root: unknown;
    try {
      text = readFileSync(f.path, 'utf8');
      root = JSON.parse(text);
    } catch (err) {
      return { ok: false, detail: `cannot read ${f.path}: ${(err as Error).message}` };
    }
    const at = locate(root, f.key);
    const value = at?.parent[at.last];
    const port = portOf(value);
    if (port === want) return ok(`${f.path} ${f.key} = ${JSON.stringify(value)}`);
    const detail =
      value === undefined
        ? `${f.path} has no ${f.key}`
        : `${f.path} ${f.key} = ${JSON.stringify(value)}, not port ${want}`;
    if (!at || value === undefined) return { ok: false, detail };
    return {
      ok: false,
      detail,
      repair: async () => {
        const backup = `${f.path}.bak-${new Date(ctx.now).toISOString().replace(/[:.]/g, '-')}`;
        writeFileAtomic(backup, text);
        at.parent[at.last] = withPort(value, want);
        writeFileAtomic(f.path, `${JSON.stringify(root, null, 2)}\n`);
        const service = ctx.config.gateway?.service;
        const restarted = service
          ? await runServiceAction(
              service,
              'restart',
              Math.min(ctx.config.timeouts.fixMs, Math.max(1, ctx.deadline - Date.now())),
            )
          : null;
        const now = portOf(locate(JSON.parse(readFileSync(f.path, 'utf8')), f.key)?.parent[at.last]);
        const fine = now === want && (restarted === null || restarted.rc === 0);
        return {
          action: `patched ${f.key} to ${JSON.stringify(at.parent[at.last])} (backup ${backup})${restarted ? `; flow service restart rc ${restarted.rc}` : ''}`,
          ok: fine,
          detail: fine ? 'configuration points at the daemon again' : 'the patch or the restart did not take',
        };
      },
    };
  },
};

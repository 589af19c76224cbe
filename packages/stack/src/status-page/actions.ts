/**
 * The status page's actions: `POST /api/services/NAME/restart` (through the supervisor's control
 * socket) and `POST /api/guardian/reset|restore` (the guardian's own commands), each guarded
 * (guard.ts) and logged with who and when, refused ones included.
 */
import { appendFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readTextOrNull, runCommand } from '@vigil/shared-types/node';
import { controlRequest } from '../control.js';
import { binOf, NODE } from '../paths.js';
import { checkAction } from './guard.js';
import { json } from './respond.js';

export interface ActionsConfig {
  readonly home: string;
  readonly socket: string;
  readonly guardianConfig: string;
  /** The action token (created 0600 when missing). */
  readonly tokenFile: string;
  /** Every action, one JSON line: when, what, from where, the outcome. */
  readonly actionsLog: string;
  readonly log: (line: string) => void;
}

const ACTION_TIMEOUT_MS = 90_000;

/** The handler of a POST to `path`. */
export function actionHandler(config: ActionsConfig) {
  const record = (req: IncomingMessage, action: string, outcome: Record<string, unknown>) => {
    const entry = {
      ts: Date.now() / 1000,
      action,
      from: `${req.socket.remoteAddress}:${req.socket.remotePort}`,
      userAgent: String(req.headers['user-agent'] ?? '').slice(0, 200),
      ...outcome,
    };
    try {
      appendFileSync(config.actionsLog, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
    } catch (err) {
      config.log(`cannot write the actions log ${config.actionsLog}: ${(err as Error).message}`);
    }
    config.log(`action ${action} from ${entry.from}: ${JSON.stringify(outcome)}`);
  };

  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const refused = checkAction(req.headers, readTextOrNull(config.tokenFile)?.trim() || null);
    const service = /^\/api\/services\/([a-z-]+)\/restart$/.exec(path)?.[1];
    const guardian = /^\/api\/guardian\/(reset|restore)$/.exec(path)?.[1];
    const action = service ? `restart ${service}` : guardian ? `guardian ${guardian}` : null;
    if (!action) return json(res, 404, { ok: false, error: `no action at ${path}` });
    if (refused) {
      record(req, action, { ok: false, status: refused.status, error: refused.error });
      return json(res, refused.status, { ok: false, error: refused.error });
    }
    if (service) {
      try {
        const r = await controlRequest(config.home, config.socket, { action: 'restart', service }, ACTION_TIMEOUT_MS);
        record(req, action, { ok: true, pid: r.pid ?? null });
        return json(res, 200, { ok: true, detail: `${service} started (pid ${r.pid ?? '?'})` });
      } catch (err) {
        record(req, action, { ok: false, error: (err as Error).message });
        return json(res, 502, { ok: false, error: (err as Error).message });
      }
    }
    const argv = [NODE, binOf('guardian'), guardian!, '--config', config.guardianConfig];
    const r = await runCommand(argv, ACTION_TIMEOUT_MS);
    record(req, action, { ok: r.rc === 0, rc: r.rc, detail: r.detail.slice(0, 300) });
    return json(res, r.rc === 0 ? 200 : 502, { ok: r.rc === 0, rc: r.rc, detail: r.detail.slice(0, 300) });
  };
}

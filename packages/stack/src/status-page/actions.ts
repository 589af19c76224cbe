/**
 * The status page's actions: `POST /api/services/NAME/restart` (through the stack's service
 * manager, managers.ts) and `POST /api/guardian/reset|restore` (the guardian's own commands, then
 * a start of the guardian, which a guardian that exited 2 needs), each guarded (guard.ts) and
 * logged with who and when, refused ones included.
 */
import { appendFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readTextOrNull, runCommand } from '@vigil/shared-types/node';
import { binOf, NODE } from '../paths.js';
import { SERVICE_NAMES } from '../service-names.js';
import { checkAction } from './guard.js';
import { INSTALLED_SERVICES, type ManagerConfig, serviceAction } from './managers.js';
import { json } from './respond.js';

export interface ActionsConfig extends ManagerConfig {
  readonly guardianConfig: string;
  /** The action token (created 0600 when missing). */
  readonly tokenFile: string;
  /** Every action, one JSON line: when, what, from where, the outcome. */
  readonly actionsLog: string;
  readonly log: (line: string) => void;
}

const ACTION_TIMEOUT_MS = 90_000;
/** The page's own service: a restart of it ends this process, so it is answered first. */
const SELF = 'status-page';

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
  const known: readonly string[] = config.restartWith === 'supervisor' ? SERVICE_NAMES : INSTALLED_SERVICES;
  const unavailable = config.restartWith === 'compose' || config.restartWith === 'none';

  const restart = async (req: IncomingMessage, res: ServerResponse, service: string) => {
    const action = `restart ${service}`;
    if (service === SELF && !unavailable) {
      // The manager stops this process: answer, then ask (the page reconnects by itself).
      record(req, action, { ok: true, status: 202 });
      res.once('finish', () => void serviceAction(config, service, 'restart', ACTION_TIMEOUT_MS));
      return json(res, 202, { ok: true, detail: 'the status page restarts; it reconnects by itself' });
    }
    const r = await serviceAction(config, service, 'restart', ACTION_TIMEOUT_MS);
    const status = r.ok ? 200 : unavailable ? 501 : 502;
    record(req, action, {
      ok: r.ok,
      ...(r.ok ? {} : { status }),
      detail: r.detail,
      ...(r.argv ? { argv: r.argv } : {}),
    });
    return json(res, status, r.ok ? { ok: true, detail: r.detail } : { ok: false, error: r.detail });
  };

  const guardian = async (req: IncomingMessage, res: ServerResponse, verb: string) => {
    const argv = [NODE, binOf('guardian'), verb, '--config', config.guardianConfig];
    const r = await runCommand(argv, ACTION_TIMEOUT_MS);
    const detail = r.detail.slice(0, 300);
    // A guardian that exited 2 stays stopped until started; a running one is left as it is.
    const start =
      r.rc === 0 && !unavailable ? await serviceAction(config, 'guardian', 'start', ACTION_TIMEOUT_MS) : null;
    const ok = r.rc === 0 && (start?.ok ?? true);
    const outcome = { ok, rc: r.rc, detail, ...(start ? { start: start.detail } : {}) };
    record(req, `guardian ${verb}`, outcome);
    return json(res, ok ? 200 : 502, outcome);
  };

  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const refused = checkAction(req.headers, readTextOrNull(config.tokenFile)?.trim() || null);
    const service = /^\/api\/services\/([a-z-]+)\/restart$/.exec(path)?.[1];
    const verb = /^\/api\/guardian\/(reset|restore)$/.exec(path)?.[1];
    if (service ? !known.includes(service) : !verb) return json(res, 404, { ok: false, error: `no action at ${path}` });
    if (refused) {
      record(req, service ? `restart ${service}` : `guardian ${verb}`, {
        ok: false,
        status: refused.status,
        error: refused.error,
      });
      return json(res, refused.status, { ok: false, error: refused.error });
    }
    return service ? restart(req, res, service) : guardian(req, res, verb!);
  };
}

/** signal_port: the daemon answers JSON-RPC `version`; with --fix, restarted or relaunched until it does. */
import { formatHostPort } from '@vigil/shared-types';
import { daemonAt } from '../io/http.js';
import { type Check, type CheckContext, ok } from './check.js';
import { endProcesses, findDaemons } from './ours.js';
import { bringBack } from './repair.js';

/** The daemon's version over JSON-RPC, or an Error saying why not. */
export async function versionOf(ctx: CheckContext): Promise<string> {
  const result = await daemonAt(ctx.config.daemon.http, ctx.config.timeouts.checkMs).rpc<{ version?: unknown }>(
    'version',
  );
  if (typeof result?.version !== 'string') throw new Error('the reply has no result.version');
  return result.version;
}

/** A probe: true while the daemon answers. */
export const answers = (ctx: CheckContext) => () =>
  versionOf(ctx).then(
    () => true,
    () => false,
  );

export const signalPort: Check = {
  name: 'signal_port',
  async run(ctx) {
    const d = ctx.config.daemon;
    try {
      return ok(`version ${await versionOf(ctx)} at ${formatHostPort(d.http)}`);
    } catch (err) {
      return {
        ok: false,
        detail: `JSON-RPC version on ${formatHostPort(d.http)} failed: ${(err as Error).message}`,
        repair: async () => {
          // A hung daemon holds the port: whatever repair follows could not take it over.
          const freed = await endHung(ctx);
          const back = await bringBack(ctx, 'the daemon', d.service, d.relaunch, answers(ctx));
          return freed ? { ...back, detail: `${freed}; ${back.detail}` } : back;
        },
      };
    }
  },
};

/**
 * Ends (TERM, then KILL) this account's daemon when it holds the daemon's port without answering;
 * says what it did, or why a holder was left alone (not ours). Undefined when nothing holds the port.
 */
async function endHung(ctx: CheckContext): Promise<string | undefined> {
  const addr = formatHostPort(ctx.config.daemon.http);
  const { account, ours, listeners } = await findDaemons(ctx, { askStatus: false });
  if (listeners.length === 0) return undefined;
  const mine = listeners.filter((pid) => ours.some((p) => p.pid === pid));
  const notes: string[] = [];
  if (mine.length > 0) {
    const gone = await endProcesses(mine);
    notes.push(
      `ended the daemon ${mine.join(', ')} that holds ${addr} and does not answer${gone ? '' : ' (still alive)'}`,
    );
  }
  for (const pid of listeners.filter((p) => !mine.includes(p))) {
    notes.push(
      `${addr} is held by pid ${pid}, which is not ${account ? `a daemon of ${account}` : `a ${ctx.config.daemon.program} daemon`}: not touched`,
    );
  }
  return notes.join('; ');
}

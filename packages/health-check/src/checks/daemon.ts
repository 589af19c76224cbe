/** signal_port: the daemon answers JSON-RPC `version`; with --fix, restarted or relaunched until it does. */
import { formatHostPort } from '@vigil/shared-types';
import { rpcCall } from '../io/http.js';
import { type Check, type CheckContext, ok } from './check.js';
import { bringBack } from './repair.js';

/** The daemon's version over JSON-RPC, or an Error saying why not. */
export async function versionOf(ctx: CheckContext): Promise<string> {
  const result = (await rpcCall(ctx.config.daemon.http, 'version', undefined, ctx.config.timeouts.checkMs)) as {
    version?: unknown;
  };
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
        repair: () => bringBack(ctx, 'the daemon', d.service, d.relaunch, answers(ctx)),
      };
    }
  },
};

/**
 * single_daemon: exactly one daemon of the configured account, and nothing answering on the
 * retired ports. With --fix, whatever holds a retired port is killed (found by port), and this
 * account's duplicates are reduced to one; another account's daemon is reported, never touched.
 */
import { formatHostPort } from '@vigil/shared-types';
import { killAll, listenersOn } from '@vigil/shared-types/node';
import { tcpAccepts } from '../io/http.js';
import { type Check, type CheckContext, ok, type Repair } from './check.js';
import { answers } from './daemon.js';
import { type Daemons, describe, endProcesses, findDaemons } from './ours.js';
import { bringBack } from './repair.js';

const plural = (n: number, word: string) => `${word}${n === 1 ? '' : 's'}`;

/** Reduces this account's daemons to one: the one serving our address when it answers, else a fresh one. */
async function reduceToOne(ctx: CheckContext, daemons: Daemons): Promise<Repair> {
  const d = ctx.config.daemon;
  const pids = daemons.ours.map((p) => p.pid);
  const serving = pids.filter((pid) => daemons.listeners.includes(pid));
  if (serving.length === 1 && (await answers(ctx)())) {
    const extra = pids.filter((pid) => pid !== serving[0]);
    const gone = await endProcesses(extra);
    const action = `ended the duplicate ${plural(extra.length, 'daemon')} ${extra.join(', ')}; kept ${serving[0]}, which serves ${formatHostPort(d.http)}`;
    return { action, ok: gone, detail: gone ? action : `${action}; some did not end` };
  }
  await endProcesses(pids);
  const back = await bringBack(ctx, 'the daemon', d.service, d.relaunch, answers(ctx));
  const detail = `ended ${pids.length} daemons (${pids.join(', ')}), none of them serving ${formatHostPort(d.http)}; ${back.detail}`;
  return { action: detail, ok: back.ok, detail };
}

export const singleDaemon: Check = {
  name: 'single_daemon',
  async run(ctx) {
    const { daemon, retiredPorts, timeouts } = ctx.config;
    const daemons = await findDaemons(ctx, { askStatus: true });
    const { ours, others, account } = daemons;
    const occupied: number[] = [];
    for (const port of retiredPorts) {
      if (await tcpAccepts({ host: '127.0.0.1', port }, Math.min(timeouts.checkMs, 1000))) occupied.push(port);
    }
    const problems: string[] = [];
    if (ours.length !== 1) {
      const what = [daemon.program + (account ? ` for ${account}` : ''), ...daemon.processMatch].join(' … ');
      problems.push(
        `${ours.length} daemon processes (${ours.map((p) => p.pid).join(', ') || 'none'}) run ${what}${account ? '' : ` and serve ${formatHostPort(daemon.http)}`}`,
      );
    }
    if (occupied.length > 0) problems.push(`something answers on retired port ${occupied.join(', ')}`);
    const notes: string[] = [];
    if (others.length > 0) notes.push(`other daemons, not touched: ${describe(others)}`);
    if (retiredPorts.length > 0 && occupied.length === 0) notes.push(`retired ports ${retiredPorts.join(', ')} silent`);
    if (problems.length === 0)
      return ok([`one daemon of ${account ?? 'an unknown account'} (pid ${ours[0]!.pid})`, ...notes].join('; '));
    return {
      ok: false,
      detail: [...problems, ...notes.filter((n) => !n.startsWith('retired'))].join('; '),
      repair: async () => {
        const done: string[] = [];
        let fine = true;
        for (const port of occupied) {
          const pids = await listenersOn(port);
          const gone = pids.length > 0 && (await killAll(pids));
          done.push(pids.length > 0 ? `killed ${pids.join(', ')} on ${port}` : `no owner found for ${port}`);
          fine &&= gone;
        }
        if (ours.length > 1) {
          const r = await reduceToOne(ctx, daemons);
          done.push(r.detail);
          fine &&= r.ok;
        } else if (ours.length === 0) {
          done.push(`no daemon of ${account ?? 'this account'} to keep`);
          fine = false;
        }
        return { action: done.join('; '), ok: fine, detail: done.join('; ') };
      },
    };
  },
};

/**
 * single_daemon: exactly one daemon process, and nothing answering on the retired ports; with
 * --fix, whatever holds a retired port is killed (found by port), duplicates are reduced to one.
 */
import { findProcesses, killAll, listenersOn } from '@vigil/shared-types/node';
import { tcpAccepts } from '../io/http.js';
import { type Check, ok } from './check.js';
import { answers } from './daemon.js';
import { bringBack } from './repair.js';

export const singleDaemon: Check = {
  name: 'single_daemon',
  async run(ctx) {
    const { daemon, retiredPorts, timeouts } = ctx.config;
    const procs = await findProcesses({ program: daemon.program, match: daemon.processMatch });
    const occupied: number[] = [];
    for (const port of retiredPorts) {
      if (await tcpAccepts({ host: '127.0.0.1', port }, Math.min(timeouts.checkMs, 1000))) occupied.push(port);
    }
    const problems: string[] = [];
    if (procs.length !== 1) {
      problems.push(
        `${procs.length} daemon processes (${procs.map((p) => p.pid).join(', ') || 'none'}) run ${[daemon.program, ...daemon.processMatch].join(' … ')}`,
      );
    }
    if (occupied.length > 0) problems.push(`something answers on retired port ${occupied.join(', ')}`);
    if (problems.length === 0)
      return ok(`one daemon (pid ${procs[0]!.pid}); retired ports ${retiredPorts.join(', ')} silent`);
    return {
      ok: false,
      detail: problems.join('; '),
      repair: async () => {
        const done: string[] = [];
        let fine = true;
        for (const port of occupied) {
          const pids = await listenersOn(port);
          const gone = pids.length > 0 && (await killAll(pids));
          done.push(pids.length > 0 ? `killed ${pids.join(', ')} on ${port}` : `no owner found for ${port}`);
          fine &&= gone;
        }
        if (procs.length > 1) {
          await killAll(procs.map((p) => p.pid));
          const back = await bringBack(ctx, 'the daemon', daemon.service, daemon.relaunch, answers(ctx));
          done.push(`killed ${procs.length} daemons; ${back.detail}`);
          fine &&= back.ok;
        } else if (procs.length === 0) {
          done.push('no daemon process to keep');
          fine = false;
        }
        return { action: done.join('; '), ok: fine, detail: done.join('; ') };
      },
    };
  },
};

/** outbound_send: a real send succeeds now (outbound.probe), or the last one is recent enough (report only). */
import { lineTime, SEND_SUCCEEDED_LOG, type SendResult } from '@vigil/shared-types';
import { tailLines } from '../io/files.js';
import { daemonAt, daemonStatus } from '../io/http.js';
import { type Check, ok, skipped } from './check.js';

export const outboundSend: Check = {
  name: 'outbound_send',
  async run(ctx) {
    const { daemon, outbound, timeouts } = ctx.config;
    if (outbound.probe) {
      const { recipient, noteToSelf, message } = outbound.probe;
      try {
        const r = await daemonAt(daemon.http, timeouts.checkMs).rpc<SendResult>('send', {
          ...(recipient ? { recipient: [recipient] } : {}),
          ...(noteToSelf ? { noteToSelf: true } : {}),
          message,
        });
        return ok(`a real send succeeded now (timestamp ${r?.timestamp})`);
      } catch (err) {
        return { ok: false, detail: `a real send failed: ${(err as Error).message}` };
      }
    }
    const status = await daemonStatus(daemon.http, timeouts.checkMs);
    let last = status?.lastOutboundSendAt ?? null;
    if (daemon.log) {
      for (const line of tailLines(daemon.log)) {
        if (!line.includes(SEND_SUCCEEDED_LOG)) continue;
        const t = lineTime(line); // Unix seconds; `last` is in ms
        if (t !== null && (last === null || t * 1000 > last)) last = t * 1000;
      }
    }
    const maxMs = outbound.maxAgeHours * 3_600_000;
    if (last === null) {
      return skipped('no outbound send seen yet (configure outbound.probe to make one, or daemon.log to read them)');
    }
    const age = ctx.now - last;
    const ageText = age < 120_000 ? `${Math.round(age / 1000)} s` : `${(age / 3_600_000).toFixed(1)} h`;
    return age <= maxMs
      ? ok(`last successful send ${ageText} ago`)
      : { ok: false, detail: `last successful send ${ageText} ago (more than ${outbound.maxAgeHours} h)` };
  },
};

/** websocket_health: no storm of WebSocket connections in the gateway's log (report only). */
import { lineTime } from '@vigil/shared-types';
import { tailLines } from '../io/files.js';
import { type Check, ok, skipped } from './check.js';

export const websocketHealth: Check = {
  name: 'websocket_health',
  async run(ctx) {
    const g = ctx.config.gateway;
    if (!g?.log) return skipped('no gateway log configured');
    const { pattern, threshold, windowMinutes } = g.storm;
    const re = new RegExp(pattern, 'i');
    const since = ctx.now - windowMinutes * 60_000;
    let count = 0;
    for (const line of tailLines(g.log)) {
      if (!re.test(line)) continue;
      const t = lineTime(line); // Unix seconds
      if (t !== null && t * 1000 >= since) count++;
    }
    const detail = `${count} WebSocket connections in the last ${windowMinutes} min (storm at ${threshold})`;
    return count >= threshold ? { ok: false, detail: `connection storm: ${detail}` } : ok(detail);
  },
};

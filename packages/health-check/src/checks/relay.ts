/** relay_link: the relay's link address accepts a connection; with --fix, the relay is restarted. */
import { formatHostPort } from '@vigil/shared-types';
import { tcpAccepts } from '../io/http.js';
import { type Check, ok, skipped } from './check.js';
import { bringBack } from './repair.js';

export const relayLink: Check = {
  name: 'relay_link',
  async run(ctx) {
    const relay = ctx.config.relay;
    if (!relay) return skipped('no relay configured');
    const link = formatHostPort(relay.link);
    const up = () => tcpAccepts(relay.link, ctx.config.timeouts.checkMs);
    if (await up()) return ok(`${link} accepts connections`);
    return {
      ok: false,
      detail: `${link} refuses or does not answer`,
      repair: () => bringBack(ctx, 'the relay', relay.service, undefined, up),
    };
  },
};

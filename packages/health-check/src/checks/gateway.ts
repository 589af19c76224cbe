/** gateway_plugin: the flow gateway is up and a consumer follows the daemon; with --fix, it is restarted. */
import { formatHostPort } from '@vigil/shared-types';
import { establishedTo } from '@vigil/shared-types/node';
import { daemonStatus, tcpAccepts } from '../io/http.js';
import { type Check, ok, skipped } from './check.js';
import { bringBack } from './repair.js';

export const gatewayPlugin: Check = {
  name: 'gateway_plugin',
  async run(ctx) {
    const g = ctx.config.gateway;
    if (!g) return skipped('no flow gateway configured');
    const probe = async (): Promise<string | null> => {
      if (!(await tcpAccepts(g.address, ctx.config.timeouts.checkMs)))
        return `the gateway ${formatHostPort(g.address)} is down`;
      const status = await daemonStatus(ctx.config.daemon.http, ctx.config.timeouts.checkMs);
      // The gateway follows the HTTP event stream: TCP clients (the relay's guests) are not it.
      const consumers = status ? status.consumers.sse : await establishedTo(ctx.config.daemon.http.port);
      return consumers > 0
        ? null
        : `no consumer holds a connection to the daemon on ${formatHostPort(ctx.config.daemon.http)}`;
    };
    const problem = await probe();
    if (problem === null) return ok(`gateway ${formatHostPort(g.address)} up, consumer connected to the daemon`);
    return {
      ok: false,
      detail: problem,
      repair: () => bringBack(ctx, 'the flow service', g.service, undefined, async () => (await probe()) === null),
    };
  },
};

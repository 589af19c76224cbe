/** The checks, in the order they run (spec 4.5, DESIGN.md 6), one module each. */
import type { Check } from './check.js';
import { signalPort } from './daemon.js';
import { forceflowPort } from './flow.js';
import { gatewayPlugin } from './gateway.js';
import { outboundSend } from './outbound.js';
import { singleDaemon } from './processes.js';
import { relayLink } from './relay.js';
import { websocketHealth } from './storm.js';

export { type Check, type CheckContext, type Finding, type Repair, runCheck } from './check.js';
export { portOf, withPort } from './flow.js';

export const CHECKS: readonly Check[] = [
  signalPort,
  relayLink,
  singleDaemon,
  gatewayPlugin,
  forceflowPort,
  websocketHealth,
  outboundSend,
];

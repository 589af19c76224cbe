/**
 * The relay: republishes the messaging daemon's TCP listener on the host-to-VM link address,
 * binding when the link appears, with an allowlist, limits and a method filter that keeps a
 * guest from taking over the account.
 */
export { allowed, type Cidr, defaultAllow, parseCidr } from './cidr.js';
export { BindError, CidrError } from './errors.js';
export { MethodFilter, REFUSED_CODE, type Verdict } from './filter.js';
export { type RelayConfig, type RelayHandle, type RelayState, startRelay as start } from './relay.js';
export { VERSION } from './version.js';

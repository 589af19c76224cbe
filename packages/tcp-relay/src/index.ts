/**
 * The relay: republishes the messaging daemon's TCP listener on the host-to-VM link address,
 * binding when the link appears, with an allowlist, limits and a method filter that keeps a
 * guest from taking over the account or reading the host's files.
 */
export { allowed, type Cidr, defaultAllow, parseCidr } from './cidr.js';
export { CidrError } from './errors.js';
export { FILE_PATH_CODE, type FilterOptions, MethodFilter, REFUSED_CODE, type Verdict } from './filter.js';
export { GuestLines, type Refusal } from './guest-lines.js';
export { relayConfig, TCP_RELAY_OPTIONS } from './options.js';
export { type RelayConfig, type RelayHandle, type RelayState, startRelay as start } from './relay.js';
export { VERSION } from './version.js';

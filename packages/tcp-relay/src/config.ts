/** The relay's configuration: what `startRelay` is given (the CLI builds it from flags and env). */
import type { HostPort, Logger } from '@vigil/shared-types';
import type { Cidr } from './cidr.js';

export interface RelayConfig {
  readonly listen: HostPort;
  readonly target: HostPort;
  /**
   * The local address the relay connects to the target from (the daemon knows the relay's
   * connections by it: they are its `relay` consumer); null: the system's choice.
   */
  readonly sourceAddress?: string | null;
  /** Sources allowed to connect. */
  readonly allow: readonly Cidr[];
  readonly maxConnections: number;
  readonly connectTimeoutMs: number;
  /** 0: no idle timeout. */
  readonly idleTimeoutMs: number;
  /** Methods refused from the guest; null: no filter, a pure byte relay. */
  readonly refuse: readonly string[] | null;
  /**
   * With the filter on, let params name files on the host (attachments, avatars, … as paths
   * rather than `data:` URIs). Off by default: the daemon or signal-cli reads such a path itself.
   */
  readonly allowFileParams?: boolean;
  readonly maxLineBytes: number;
  /** Most bytes one source address may send a minute, all its connections together (0: no limit). */
  readonly maxBytesPerMinute: number;
  /** While the listen address is absent, a bind is tried this often. */
  readonly bindRetryMs: number;
  /** While bound, the listen address is checked this often (it goes away with the VM). */
  readonly watchIntervalMs: number;
  /** On close, connections get this long before they are cut. */
  readonly shutdownGraceMs: number;
  readonly logger: Logger;
}

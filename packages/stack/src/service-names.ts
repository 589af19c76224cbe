/** The names of the services the stack runs (no imports: the CLI's start-up reads them). */
/** The services, in the order they start. */
export const SERVICE_NAMES = [
  'signal-daemon',
  'tcp-relay',
  'inference-server',
  'inference-fallback',
  'guardian',
  'status-page',
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

/** The order they stop: the guardian first (it must not restart what is being stopped), the daemon last. */
export const STOP_ORDER: readonly ServiceName[] = [
  'status-page',
  'guardian',
  'tcp-relay',
  'inference-fallback',
  'inference-server',
  'signal-daemon',
];

export const isServiceName = (name: string): name is ServiceName => (SERVICE_NAMES as readonly string[]).includes(name);

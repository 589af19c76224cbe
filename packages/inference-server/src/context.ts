/** What the routes and the completion flow see of a running server. */
import type { RequestLog } from './access-log.js';
import type { ServerConfig } from './config.js';
import type { Engine } from './engine.js';
import type { EndReason } from './errors.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';
import type { ProgressTracker } from './progress.js';
import type { Scheduler } from './scheduler.js';

export type ServerState = 'loading' | 'ready' | 'failed' | 'stopping' | 'stopped';

export interface ServerContext {
  readonly config: ServerConfig;
  readonly logger: Logger;
  readonly scheduler: Scheduler;
  /** Aborters of every completion under way (running or queued). */
  readonly inFlight: Set<(reason: EndReason) => void>;
  /** Responses not yet finished. */
  readonly responses: { open: number };
  /** Writes the access-log line and counts the request in the metrics. */
  readonly access: RequestLog;
  readonly metrics: Metrics;
  /** Per-slot progress (fed by the engine): stalled slots make /health 503. */
  readonly progress: ProgressTracker;
  state(): ServerState;
  /** The model once loaded; null before. */
  engine(): Engine | null;
}

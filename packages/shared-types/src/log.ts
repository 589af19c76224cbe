/**
 * The log format of every vigil service: one JSON object per line,
 * `{"ts":<Unix seconds with fraction>,"level":…,"msg":…,"service":…,…fields}`.
 */

export type ServiceLogLevel = 'error' | 'warn' | 'info' | 'debug';
export const SERVICE_LOG_LEVELS: readonly ServiceLogLevel[] = ['error', 'warn', 'info', 'debug'];

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

/** One log line (without the newline). Fields never override ts, level, msg or service. */
export function logLine(
  level: ServiceLogLevel,
  msg: string,
  service: string,
  fields: Record<string, unknown> = {},
  now: number = Date.now(),
): string {
  const record: Record<string, unknown> = { ts: now / 1000, level, msg, service };
  for (const [k, v] of Object.entries(fields)) if (!(k in record)) record[k] = v;
  return JSON.stringify(record);
}

/** True when a message at `level` is written by a logger set to `threshold`. */
export function logEnabled(level: ServiceLogLevel, threshold: ServiceLogLevel): boolean {
  return SERVICE_LOG_LEVELS.indexOf(level) <= SERVICE_LOG_LEVELS.indexOf(threshold);
}

/** A logger that keeps records in memory (tests, embedding), or drops them when given null. */
export function memoryLogger(records: Record<string, unknown>[] | null = []): Logger {
  const at =
    (level: ServiceLogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      records?.push({ ts: Date.now() / 1000, level, msg, ...fields });
    };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

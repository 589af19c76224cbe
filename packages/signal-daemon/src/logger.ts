import winston from 'winston';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

/**
 * One JSON object per line: `{"ts":<unix seconds>,"level":"info","msg":"…",…fields}`, to stdout
 * or appended to a file.
 */
export function createLogger(options: { level: LogLevel; file?: string | undefined; service: string }): Logger {
  const format = winston.format.printf(({ level, message, ...fields }) =>
    JSON.stringify({ ts: Date.now() / 1000, level, msg: message, service: options.service, ...fields }),
  );
  const transport = options.file
    ? new winston.transports.File({ filename: options.file, format })
    : new winston.transports.Stream({ stream: process.stdout, format });
  const w = winston.createLogger({ level: options.level, transports: [transport] });
  const at =
    (level: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) =>
      w.log(level, msg, fields);
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

/** A logger that keeps records in memory (tests, embedding) or drops them. */
export function memoryLogger(records: Record<string, unknown>[] | null = []): Logger {
  const at =
    (level: LogLevel) =>
    (msg: string, fields: Record<string, unknown> = {}) => {
      records?.push({ ts: Date.now() / 1000, level, msg, ...fields });
    };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

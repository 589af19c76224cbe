import { type Logger, logEnabled, logLine, type ServiceLogLevel } from '@vigil/shared-types';
import winston from 'winston';

export { type Logger, memoryLogger, SERVICE_LOG_LEVELS as LOG_LEVELS } from '@vigil/shared-types';
export type LogLevel = ServiceLogLevel;

/** The shared-types log format, written by winston to stdout or appended to a file. */
export function createLogger(options: { level: LogLevel; file?: string | undefined; service: string }): Logger {
  const format = winston.format.printf(({ level, message, ...fields }) =>
    logLine(level as LogLevel, String(message), options.service, fields),
  );
  const transport = options.file
    ? new winston.transports.File({ filename: options.file, format })
    : new winston.transports.Stream({ stream: process.stdout, format });
  const w = winston.createLogger({ level: options.level, transports: [transport] });
  // Messages below the level cost nothing: winston would format them before dropping them.
  const at = (level: LogLevel) =>
    logEnabled(level, options.level)
      ? (msg: string, fields: Record<string, unknown> = {}) => w.log(level, msg, fields)
      : () => {};
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug') };
}

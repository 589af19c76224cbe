import { type Logger as BaseLogger, logEnabled, logLine, type ServiceLogLevel } from '@vigil/shared-types';
import winston from 'winston';

export { memoryLogger, SERVICE_LOG_LEVELS as LOG_LEVELS } from '@vigil/shared-types';
export type LogLevel = ServiceLogLevel;

export interface Logger extends BaseLogger {
  /** Flushes and closes the log file (bounded wait); call before exiting. */
  close?(): Promise<void>;
}

/**
 * The shared-types log format (one JSON object per line), written by winston to stdout or
 * appended to a file. Messages below the level cost nothing.
 */
export function createLogger(options: { level: LogLevel; file?: string | undefined; service: string }): Logger {
  const format = winston.format.printf(({ level, message, ...fields }) =>
    logLine(level as LogLevel, String(message), options.service, fields),
  );
  const transport = options.file
    ? new winston.transports.File({ filename: options.file, format })
    : new winston.transports.Stream({ stream: process.stdout, format });
  const w = winston.createLogger({ level: options.level, transports: [transport] });
  const at = (level: LogLevel) =>
    logEnabled(level, options.level)
      ? (msg: string, fields: Record<string, unknown> = {}) => w.log(level, msg, fields)
      : () => {};
  let closed: Promise<void> | null = null;
  const close = () => {
    // winston writes through a stream pipeline: a line logged just before exit is still
    // queued, on stdout as in a file. Ending the logger drains it (bounded wait).
    closed ??= new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 1000);
      t.unref();
      transport.once('finish', () => {
        clearTimeout(t);
        resolve();
      });
      w.end();
    });
    return closed;
  };
  return { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), close };
}

/**
 * The services' logger: the shared log format (one JSON object per line, see `logLine`) written by
 * winston to stdout or appended to a file (0600). The contracts take no logging dependency: each
 * service passes its own `winston` module in (`createServiceLogger(winston, {...})`), so the
 * wiring exists once. Messages below the level cost nothing.
 */
import { closeSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { type Logger, logEnabled, logLine, type ServiceLogLevel } from '../log.js';
import { ensureDir, PRIVATE_DIR, PRIVATE_FILE } from './fs.js';

export interface ServiceLogger extends Logger {
  /** Flushes and closes the log (bounded wait); call before exiting. */
  close?(): Promise<void>;
}

interface TransportLike {
  once(event: 'finish', listener: () => void): unknown;
}

/** The part of the winston module this uses (structural, so the contracts need not depend on it). */
export interface WinstonLike {
  format: { printf(fn: (info: { level: string; message: unknown; [key: string]: unknown }) => string): unknown };
  transports: {
    File: new (options: { filename: string; format: never }) => TransportLike;
    Stream: new (options: { stream: NodeJS.WritableStream; format: never }) => TransportLike;
  };
  createLogger(options: { level: string; transports: never[] }): {
    log(level: string, message: string, meta: Record<string, unknown>): unknown;
    end(): unknown;
  };
}

export function createServiceLogger(
  winston: WinstonLike,
  options: { level: ServiceLogLevel; file?: string | undefined; service: string },
): ServiceLogger {
  const format = winston.format.printf(({ level, message, ...fields }) =>
    logLine(level as ServiceLogLevel, String(message), options.service, fields),
  ) as never;
  if (options.file) {
    // The log holds what the service saw (addresses, accounts): private, whatever the umask.
    ensureDir(dirname(options.file), PRIVATE_DIR);
    closeSync(openSync(options.file, 'a', PRIVATE_FILE));
  }
  const transport = options.file
    ? new winston.transports.File({ filename: options.file, format })
    : new winston.transports.Stream({ stream: process.stdout, format });
  const w = winston.createLogger({ level: options.level, transports: [transport as never] });
  const at = (level: ServiceLogLevel) =>
    logEnabled(level, options.level)
      ? (msg: string, fields: Record<string, unknown> = {}) => {
          w.log(level, msg, fields);
        }
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

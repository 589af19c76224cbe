/** The service's logger: the shared wiring (one JSON object per line) over this package's winston. */
import type { ServiceLogLevel } from '@vigil/shared-types';
import { createServiceLogger, type ServiceLogger } from '@vigil/shared-types/node';
import winston from 'winston';

export { memoryLogger, SERVICE_LOG_LEVELS as LOG_LEVELS } from '@vigil/shared-types';
export type Logger = ServiceLogger;
export type LogLevel = ServiceLogLevel;

export const createLogger = (options: { level: LogLevel; file?: string | undefined; service: string }): Logger =>
  createServiceLogger(winston, options);

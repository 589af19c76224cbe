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

/**
 * A JSON log line (without the newline) whose first key is `ts`, Unix seconds always written with
 * a fraction (`1700000000.000`, never `1700000000`: spec 2.5), then `record`'s keys in order
 * (a `ts` among them is ignored).
 */
export function jsonLogLine(tsSeconds: number, record: Record<string, unknown>): string {
  const { ts: _ignored, ...rest } = record;
  const body = JSON.stringify(rest);
  const ts = Number.isFinite(tsSeconds) ? tsSeconds.toFixed(3) : '0.000';
  return body === '{}' ? `{"ts":${ts}}` : `{"ts":${ts},${body.slice(1)}`;
}

/** One log line (without the newline). Fields never override ts, level, msg or service. */
export function logLine(
  level: ServiceLogLevel,
  msg: string,
  service: string,
  fields: Record<string, unknown> = {},
  now: number = Date.now(),
): string {
  const record: Record<string, unknown> = { level, msg, service };
  for (const [k, v] of Object.entries(fields)) if (!(k in record) && k !== 'ts') record[k] = v;
  return jsonLogLine(now / 1000, record);
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

const MONTHS: Readonly<Record<string, number>> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

/** A number that may be Unix seconds or milliseconds, as seconds. */
const asSeconds = (n: number): number => (n > 1e11 ? n / 1000 : n);

/**
 * The time a log line carries, in Unix seconds (with fraction), or null: a JSON record's numeric
 * `ts`, `time` or `timestamp` (seconds or milliseconds, vigil's own logs and most JSON loggers),
 * or a string one in ISO-8601; an ISO-8601 time anywhere in a text line; or the
 * `[22/Nov/2025 10:15:01]` of Python's http.server (local time).
 */
export function lineTime(line: string): number | null {
  const json = /"(?:ts|time|timestamp)"\s*:\s*(?:(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|"([^"]*)")/.exec(line);
  if (json) {
    if (json[1] !== undefined) return asSeconds(Number(json[1]));
    const t = Date.parse(json[2]!);
    if (Number.isFinite(t)) return t / 1000;
  }
  const iso = /\b(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)/.exec(line);
  if (iso) {
    const t = Date.parse(iso[1]!.replace(' ', 'T'));
    if (Number.isFinite(t)) return t / 1000;
  }
  const py = /\[(\d{2})\/([A-Z][a-z]{2})\/(\d{4})[ :](\d{2}):(\d{2}):(\d{2})/.exec(line);
  if (py && MONTHS[py[2]!] !== undefined) {
    const d = new Date(Number(py[3]), MONTHS[py[2]!]!, Number(py[1]), Number(py[4]), Number(py[5]), Number(py[6]));
    return d.getTime() / 1000;
  }
  return null;
}

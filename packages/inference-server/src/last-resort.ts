/**
 * Total parsing of what a request line carries, and the last resort for a bug in one request:
 * whatever a client sends, the server answers it (a 4xx in OpenAI's shape, or 500 for a bug) and
 * goes on serving everyone else.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ServerContext } from './context.js';
import { ApiError } from './errors.js';
import { sendJson } from './http.js';

/** The path of a request target (no query string); `/` for none. Never throws. */
export function requestPath(url: string | undefined): string {
  const target = url ?? '/';
  const q = target.indexOf('?');
  const path = q < 0 ? target : target.slice(0, q);
  return path === '' ? '/' : path;
}

/**
 * A percent-encoded path segment decoded; a malformed escape (`%E0`, `%zz`) is kept as it was
 * sent, so that it names nothing and gets the route's 404, never an exception.
 */
export function decodePathPart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

export const internalError = (): ApiError =>
  new ApiError(
    500,
    'The server had an error while processing your request. It was logged; other requests are not affected.',
    'server_error',
    null,
    'internal_error',
  );

/**
 * A request whose handling threw: one log line (with the stack's first frames), a 500 in the
 * shape of the path's protocol (`errorBody`; OpenAI's by default) when the reply has not begun
 * (else the connection is closed), and the access log entry. The process goes on.
 */
export function lastResort(
  ctx: ServerContext,
  req: IncomingMessage,
  res: ServerResponse,
  listener: string,
  startedNs: bigint,
  err: unknown,
  errorBody: (e: ApiError) => unknown = (e) => e.toJSON(),
): void {
  try {
    const stack = err instanceof Error ? (err.stack ?? err.message) : String(err);
    ctx.logger.error('request failed with an internal error', {
      method: String(req.method).slice(0, 16),
      path: requestPath(req.url).slice(0, 200),
      listener,
      error: stack.split('\n').slice(0, 4).join(' | ').slice(0, 1000),
    });
    if (!res.headersSent && !res.destroyed) {
      const e = internalError();
      sendJson(res, e.status, errorBody(e));
    } else if (!res.writableEnded) res.destroy();
    ctx.access(req, listener, startedNs, 500);
  } catch {
    // The logger or the socket failed too: nothing more can be said about this request.
    res.destroy();
  }
}

/** Reading a request body within a limit, and writing JSON replies. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiError } from './errors.js';
import { bodyTooLarge, clientClosed } from './openai.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

/** Reads a request body up to `limit` bytes; ApiError 413 beyond, 499 when the client leaves. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      req.resume();
      reject(bodyTooLarge(limit));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        req.removeAllListeners('data');
        req.resume();
        reject(bodyTooLarge(limit));
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    // A client that leaves in the middle of its body: nothing waits for the rest.
    req.on('close', () => {
      if (!req.complete) reject(clientClosed());
    });
  });
}

/** A JSON reply (a Buffer is sent as it is); nothing when the reply has begun or the client left. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const data = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  res.writeHead(status, { ...JSON_HEADERS, 'content-length': String(data.length), ...headers });
  res.end(data);
}

export function sendError(res: ServerResponse, err: ApiError): void {
  sendJson(res, err.status, err.toJSON(), { ...err.headers });
}

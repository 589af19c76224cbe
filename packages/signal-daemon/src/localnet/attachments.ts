/**
 * Attachments: getAttachment, the bytes of a received attachment by its id as base64
 * (`{"data":…}`); and the attachments of what this account sends, read and staged.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { readAttachmentFile } from '../attachments.js';
import { invalidParams, userError } from '../errors.js';
import { numbers, optString, type Params, reqString } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';
import { contentTypeOf } from './sniff.js';
import type { AttachmentRow } from './store.js';

/**
 * Found by id alone, or by id and the sender (`recipient`) or group it came with, as signal-cli
 * finds it; an id this account did not receive (or from someone else) is -1.
 */
function getAttachment(ctx: LocalContext, p: Params): { data: string } {
  const id = reqString(p, 'id');
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(id)) throw invalidParams('id must be an attachment id from a received message');
  const sender = numbers(p, 'recipient')[0];
  const groupId = optString(p, 'groupId');
  const origin = ctx.records.attachmentOrigin(ctx.me.number, id);
  const notFound = () => userError(`Attachment not found: ${id}`);
  if (!origin) throw notFound();
  if (sender !== undefined && origin.sender !== sender) throw notFound();
  if (groupId !== undefined && origin.groupId !== groupId) throw notFound();
  try {
    return { data: readFileSync(join(ctx.dataDir, 'attachments', id)).toString('base64') };
  } catch {
    throw notFound();
  }
}

export const attachmentMethods: LocalMethods = { getAttachment };

/** An attachment given as a data URI (`data:MIME[;filename=NAME];base64,DATA`) or a file path. */
export async function readAttachment(ctx: LocalContext, spec: string): Promise<AttachmentRow> {
  const id = randomBytes(12).toString('hex');
  const uri = /^data:([^;,]+)?((?:;[^;,=]+=[^;,]*)*)(;base64)?,(.*)$/s.exec(spec);
  if (!uri) {
    // A path: checked (regular file, size, allowed directories) before it is read, off the event loop.
    const data = await readAttachmentFile(spec, ctx.attachmentPolicy);
    return { id, contentType: contentTypeOf(data), filename: basename(spec), data };
  }
  const contentType = uri[1] ?? 'text/plain';
  const filename = /;filename=([^;,]*)/.exec(uri[2] ?? '')?.[1] ?? null;
  let data: Buffer;
  try {
    data = uri[3] ? Buffer.from(uri[4] ?? '', 'base64') : Buffer.from(decodeURIComponent(uri[4] ?? ''));
  } catch {
    throw invalidParams('attachment data URI is not validly percent-encoded');
  }
  if (data.length > ctx.attachmentPolicy.maxBytes) {
    throw invalidParams(`attachment data URI is larger than the limit of ${ctx.attachmentPolicy.maxBytes} bytes`);
  }
  return { id, contentType, filename, data };
}

/**
 * Reads every attachment (each refusal -32602 naming it), then stages them: the rows come back to
 * be written with `store.storeAttachments` in the transaction that stores what refers to them.
 */
export async function stagedAttachments(
  ctx: LocalContext,
  specs: readonly string[],
): Promise<{ result: Record<string, unknown>[]; staged: AttachmentRow[] }> {
  const rows: AttachmentRow[] = [];
  for (const spec of specs) rows.push(await readAttachment(ctx, spec));
  return ctx.store.stageAttachments(() => rows.map((a) => attachmentPointer(ctx, a)));
}

function attachmentPointer(ctx: LocalContext, a: AttachmentRow): Record<string, unknown> {
  ctx.store.putAttachment(a);
  return {
    contentType: a.contentType,
    filename: a.filename,
    id: a.id,
    size: a.data.length,
    width: null,
    height: null,
    caption: null,
    uploadTimestamp: Date.now(),
  };
}

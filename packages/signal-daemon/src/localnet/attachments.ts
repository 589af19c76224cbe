/** getAttachment: the bytes of a received attachment, by its id, as base64 (`{"data":…}`). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { invalidParams, userError } from '../errors.js';
import { numbers, optString, type Params, reqString } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

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

/** Messages: send (to numbers, groups, note to self; with attachments) and sendReceipt. */
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import type { DataMessage, SendResult, SendResultEntry } from '@vigil/shared-types';
import { readAttachmentFile } from '../attachments.js';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, optString, type Params, strings, timestamps } from '../params.js';
import { memberGroup } from './groups.js';
import type { LocalContext, LocalMethods } from './methods.js';
import type { AttachmentRow } from './store.js';

/** A send that reached nobody it was meant for fails as signal-cli's does (-1, with the results). */
function finishSend(timestamp: number, results: SendResultEntry[], what: string): SendResult {
  const result: SendResult = { timestamp, results };
  const ok = results.filter((r) => r.type === 'SUCCESS').length;
  if (results.length > 0 && ok === 0) {
    const why = [...new Set(results.map((r) => r.type))].join(', ');
    throw userError(`Failed to send ${what}: ${why}`, { response: result });
  }
  return result;
}

async function send(ctx: LocalContext, p: Params): Promise<SendResult> {
  const recipients = numbers(p, 'recipient');
  const groupIds = strings(p, 'groupId');
  const noteToSelf = optBool(p, 'noteToSelf');
  if (noteToSelf) recipients.push(ctx.me.number);
  if (recipients.length === 0 && groupIds.length === 0) {
    throw invalidParams('no recipients given: set recipient, groupId or noteToSelf');
  }
  const message = optString(p, 'message') ?? null;
  const specs = [...strings(p, 'attachments'), ...strings(p, 'attachment')];
  if (message === null && specs.length === 0) throw invalidParams('message or attachments required');
  // Every attachment is read and checked before any is stored: a refused one stores nothing.
  const files: AttachmentRow[] = [];
  for (const spec of specs) files.push(await attachment(ctx, spec));
  const attachments = files.map((f) => storeAttachment(ctx, f));
  const timestamp = ctx.nextTimestamp();
  const dataMessage = (groupInfo?: DataMessage['groupInfo']): DataMessage => ({
    timestamp,
    message,
    expiresInSeconds: 0,
    viewOnce: false,
    ...(attachments.length > 0 ? { attachments } : {}),
    ...(groupInfo ? { groupInfo } : {}),
  });
  const results: SendResultEntry[] = [];
  if (recipients.length > 0) {
    results.push(...(await ctx.post(recipients, ctx.envelope(timestamp, { dataMessage: dataMessage() }))));
  }
  for (const groupId of groupIds) {
    const group = memberGroup(ctx, groupId);
    const members = ctx.store.members(groupId).filter((m) => m.number !== ctx.me.number);
    const info = { groupId, groupName: group.name, revision: group.revision, type: 'DELIVER' };
    results.push(
      ...(await ctx.post(
        members.map((m) => m.number),
        ctx.envelope(timestamp, { dataMessage: dataMessage(info) }),
      )),
    );
  }
  // A group with no other members is a successful send to nobody.
  return finishSend(timestamp, results, 'message');
}

/** An attachment given as a data URI (`data:MIME[;filename=NAME];base64,DATA`) or a file path. */
async function attachment(ctx: LocalContext, spec: string): Promise<AttachmentRow> {
  const id = randomBytes(12).toString('hex');
  const uri = /^data:([^;,]+)?((?:;[^;,=]+=[^;,]*)*)(;base64)?,(.*)$/s.exec(spec);
  if (!uri) {
    const data = await readAttachmentFile(spec, ctx.attachmentPolicy);
    return { id, contentType: 'application/octet-stream', filename: basename(spec), data };
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

function storeAttachment(ctx: LocalContext, a: AttachmentRow): Record<string, unknown> {
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

async function sendReceipt(ctx: LocalContext, p: Params): Promise<SendResult> {
  const recipients = numbers(p, 'recipient');
  if (recipients.length !== 1) throw invalidParams('recipient must be exactly one phone number');
  const targets = [...timestamps(p, 'targetTimestamp'), ...timestamps(p, 'targetTimestamps')];
  if (targets.length === 0) throw invalidParams('targetTimestamp is required');
  const type = optString(p, 'type') ?? 'read';
  if (type !== 'read' && type !== 'viewed') throw invalidParams('type must be read or viewed');
  const timestamp = ctx.nextTimestamp();
  const receiptMessage = {
    when: timestamp,
    isDelivery: false,
    isRead: type === 'read',
    isViewed: type === 'viewed',
    timestamps: targets,
  };
  const results = await ctx.post(recipients, ctx.envelope(timestamp, { receiptMessage }));
  return finishSend(timestamp, results, 'receipt');
}

export const messageMethods: LocalMethods = { send, sendReceipt };

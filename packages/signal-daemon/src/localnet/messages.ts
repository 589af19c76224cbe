/** Messages: send (to numbers, groups, note to self; with attachments, styles, quotes, edits), sendReceipt, sendTyping. */
import {
  type DataMessage,
  type Mention,
  type Preview,
  type Quote,
  type Reaction,
  RpcErrorCode,
  type SendResult,
  type SendResultEntry,
  type SyncMessage,
  type TextStyle,
} from '@vigil/shared-types';
import { invalidParams, RpcFailure, userError } from '../errors.js';
import { numbers, optBool, optString, type Params, strings, timestamps } from '../params.js';
import { stagedAttachments } from './attachments.js';
import { mentions, previews, quote, textStyles } from './content.js';
import { memberGroup } from './groups.js';
import type { EnvelopeBody, LocalContext, LocalMethods } from './methods.js';
import { stickerRef } from './stickers.js';

/** A send that reached nobody it was meant for fails as signal-cli's does (-1, or -4 for an untrusted identity). */
export function finishSend(timestamp: number, results: SendResultEntry[], what: string): SendResult {
  const result: SendResult = { timestamp, results };
  const ok = results.filter((r) => r.type === 'SUCCESS').length;
  if (results.length > 0 && ok === 0) {
    const why = [...new Set(results.map((r) => r.type))].join(', ');
    if (results.some((r) => r.type === 'IDENTITY_FAILURE')) {
      throw new RpcFailure(RpcErrorCode.UNTRUSTED_IDENTITY, `Failed to send ${what}: untrusted identity: ${why}`, {
        response: result,
      });
    }
    throw userError(`Failed to send ${what}: ${why}`, { response: result });
  }
  return result;
}

/** The groups of a send, checked before anything is stored: a member, allowed to send. */
export function sendableGroups(ctx: LocalContext, groupIds: readonly string[]) {
  return groupIds.map((groupId) => {
    const group = memberGroup(ctx, groupId);
    const settings = ctx.records.settings(groupId);
    const members = ctx.store.members(groupId);
    if (settings.sendMessages === 'ONLY_ADMINS' && !members.some((m) => m.number === ctx.me.number && m.admin)) {
      throw userError(`Only admins may send to group ${groupId}`);
    }
    const others = members.filter((m) => m.number !== ctx.me.number).map((m) => m.number);
    const info = { groupId, groupName: group.name, revision: group.revision, type: 'DELIVER' };
    return { groupId, others, info, expiration: settings.expiration };
  });
}

/** A data message with only the keys that have a value, in signal-cli's order. */
export function dataMessage(
  fields: {
    timestamp: number;
    message?: string | null;
    expiresInSeconds?: number;
    viewOnce?: boolean;
    reaction?: Reaction;
    quote?: Quote;
    mentions?: readonly Mention[];
    previews?: readonly Preview[];
    attachments?: readonly unknown[];
    remoteDelete?: { timestamp: number };
    textStyles?: readonly TextStyle[];
    groupInfo?: DataMessage['groupInfo'];
  } & Pick<
    DataMessage,
    'sticker' | 'payment' | 'pollCreate' | 'pollVote' | 'pollTerminate' | 'pinMessage' | 'unpinMessage' | 'adminDelete'
  >,
): DataMessage {
  const out: Record<string, unknown> = {
    timestamp: fields.timestamp,
    message: fields.message ?? null,
    expiresInSeconds: fields.expiresInSeconds ?? 0,
    viewOnce: fields.viewOnce ?? false,
  };
  for (const key of [
    'reaction',
    'quote',
    'payment',
    'mentions',
    'previews',
    'attachments',
    'sticker',
    'remoteDelete',
    'pollCreate',
    'pollVote',
    'pollTerminate',
    'textStyles',
    'groupInfo',
    'pinMessage',
    'unpinMessage',
    'adminDelete',
  ] as const) {
    const v = fields[key];
    if (v !== undefined && !(Array.isArray(v) && v.length === 0)) out[key] = v;
  }
  return out as unknown as DataMessage;
}

/** What the account sent, as its own devices see it (note to self). */
export function sentMessage(ctx: LocalContext, destination: string | null, dm: DataMessage): SyncMessage {
  const account = destination ? ctx.store.account(destination) : undefined;
  return {
    sentMessage: {
      destination,
      destinationNumber: destination,
      destinationUuid: account?.uuid ?? null,
      ...dm,
    },
  };
}

async function send(ctx: LocalContext, p: Params): Promise<SendResult> {
  const { me } = ctx;
  const recipients = numbers(p, 'recipient').filter((n) => n !== me.number);
  const toSelf = optBool(p, 'noteToSelf') || numbers(p, 'recipient').includes(me.number);
  const groupIds = strings(p, 'groupId');
  if (recipients.length === 0 && groupIds.length === 0 && !toSelf) {
    throw invalidParams('no recipients given: set recipient, groupId or noteToSelf');
  }
  const message = optString(p, 'message') ?? null;
  const fields = {
    message,
    viewOnce: optBool(p, 'viewOnce'),
    textStyles: textStyles('textStyle', strings(p, 'textStyle'), message),
    mentions: mentions(ctx, 'mention', strings(p, 'mention'), message),
    quote: quote(ctx, p),
    previews: previews(p),
    sticker: stickerRef(ctx, optString(p, 'sticker')),
  };
  const editTimestamp = timestamps(p, 'editTimestamp')[0];
  if (editTimestamp !== undefined && ctx.records.sentBy(me.number, editTimestamp).length === 0) {
    throw userError(`Message to edit not found: no message of this account was sent at ${editTimestamp}`);
  }
  const groups = sendableGroups(ctx, groupIds);
  // Attachments are all read and checked first, then staged, and stored with the message: a
  // refused attachment or a send that fails stores none.
  const { result: attachments, staged } = await stagedAttachments(ctx, strings(p, 'attachment'));
  if (message === null && attachments.length === 0 && !fields.sticker) {
    throw invalidParams('message, attachments or sticker required');
  }
  let stored = false;
  const alsoInTransaction = () => {
    if (!stored) ctx.store.storeAttachments(staged);
    stored = true;
  };
  const timestamp = ctx.nextTimestamp();
  const body = (expiresInSeconds: number, groupInfo?: DataMessage['groupInfo']): EnvelopeBody => {
    const dm = dataMessage({ timestamp, expiresInSeconds, attachments, groupInfo, ...fields });
    return editTimestamp === undefined
      ? { dataMessage: dm }
      : { editMessage: { targetSentTimestamp: editTimestamp, dataMessage: dm } };
  };
  const record = editTimestamp === undefined;
  const results: SendResultEntry[] = [];
  // One envelope per disappearing-message timer of the recipients (updateContact's expiration).
  const byTimer = new Map<number, string[]>();
  for (const n of recipients) {
    const timer = ctx.sendRead(`expiration:${n}`, () => ctx.records.contact(me.number, n)?.expiration ?? 0);
    byTimer.set(timer, [...(byTimer.get(timer) ?? []), n]);
  }
  for (const [timer, list] of byTimer) {
    const options = { record: record ? { groupId: null } : undefined, alsoInTransaction };
    results.push(...(await ctx.post(list, ctx.envelope(timestamp, body(timer)), options)));
  }
  for (const g of groups) {
    const options = { record: record ? { groupId: g.groupId } : undefined, alsoInTransaction };
    results.push(...(await ctx.post(g.others, ctx.envelope(timestamp, body(g.expiration, g.info)), options)));
  }
  if (toSelf) {
    const dm = dataMessage({ timestamp, attachments, ...fields });
    const envelope = ctx.envelope(timestamp, { syncMessage: sentMessage(ctx, me.number, dm) });
    const options = { record: record ? { groupId: null } : undefined, alsoInTransaction };
    results.push(...(await ctx.post([me.number], envelope, options)));
  }
  // A group with no other members is a successful send to nobody.
  return finishSend(timestamp, results, 'message');
}

async function sendReceipt(ctx: LocalContext, p: Params): Promise<SendResult> {
  const recipients = numbers(p, 'recipient');
  if (recipients.length !== 1) throw invalidParams('recipient must be exactly one phone number');
  const targets = timestamps(p, 'targetTimestamp');
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

/** A typing indicator (STARTED, or STOPPED with `stop`) to recipients and groups; `{}` as signal-cli. */
async function sendTyping(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const recipients = numbers(p, 'recipient');
  const groups = sendableGroups(ctx, strings(p, 'groupId'));
  if (recipients.length === 0 && groups.length === 0) throw invalidParams('recipient or groupId is required');
  const action = optBool(p, 'stop') ? 'STOPPED' : 'STARTED';
  const timestamp = ctx.nextTimestamp();
  const results: SendResultEntry[] = [];
  if (recipients.length > 0) {
    results.push(...(await ctx.post(recipients, ctx.envelope(timestamp, { typingMessage: { action, timestamp } }))));
  }
  for (const g of groups) {
    const typingMessage = { action, timestamp, groupId: g.groupId } as const;
    results.push(...(await ctx.post(g.others, ctx.envelope(timestamp, { typingMessage }))));
  }
  finishSend(timestamp, results, 'typing message');
  return {};
}

export const messageMethods: LocalMethods = { send, sendReceipt, sendTyping };

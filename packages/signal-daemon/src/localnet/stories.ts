/**
 * Stories (signal-cli 0.14.6's sendStory) and payment notifications (sendPaymentNotification).
 * A story is an envelope with signal-cli's `storyMessage` (allowsReplies, groupId, fileAttachment):
 * to a group's other members with groupId, else to this account's story audience, its contacts
 * that it has not blocked. Its attachment is stored with it, as a message's is. A payment
 * notification is a data message with signal-cli's `payment` field (note, receipt in base64);
 * the embedded network moves no money, it only delivers the notification.
 */
import type { SendResult, SendResultEntry, StoryMessage } from '@vigil/shared-types';
import { invalidParams } from '../errors.js';
import { numbers, optBool, optString, type Params, reqString } from '../params.js';
import { stagedAttachments } from './attachments.js';
import { postToAll } from './interactions.js';
import { finishSend, sendableGroups } from './messages.js';
import type { LocalContext, LocalMethods } from './methods.js';

async function sendStory(ctx: LocalContext, p: Params): Promise<SendResult> {
  const spec = reqString(p, 'attachment');
  const groupId = optString(p, 'groupId');
  const group = groupId === undefined ? undefined : sendableGroups(ctx, [groupId])[0]!;
  const audience = group
    ? group.others
    : ctx.store
        .contacts(ctx.me.number)
        .filter((c) => !c.blocked && c.number !== ctx.me.number)
        .map((c) => c.number);
  const { result, staged } = await stagedAttachments(ctx, [spec]);
  const storyMessage: StoryMessage = {
    allowsReplies: !optBool(p, 'noReplies'),
    ...(group ? { groupId: group.groupId } : {}),
    fileAttachment: result[0],
  };
  const timestamp = ctx.nextTimestamp();
  const results: SendResultEntry[] = [];
  if (audience.length > 0) {
    const envelope = ctx.envelope(timestamp, { storyMessage });
    const alsoInTransaction = () => ctx.store.storeAttachments(staged);
    results.push(...(await ctx.post(audience, envelope, { alsoInTransaction })));
  }
  return finishSend(timestamp, results, 'story');
}

async function sendPaymentNotification(ctx: LocalContext, p: Params): Promise<SendResult> {
  const recipient = numbers(p, 'recipient');
  if (recipient.length !== 1) throw invalidParams('recipient must be exactly one phone number');
  const given = reqString(p, 'receipt');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(given) || given.length % 4 === 1) {
    throw invalidParams('receipt must be the receipt blob in base64');
  }
  const payment = { note: optString(p, 'note') ?? null, receipt: Buffer.from(given, 'base64').toString('base64') };
  return postToAll(ctx, { recipients: recipient, groups: [], toSelf: false }, { payment }, 'payment notification');
}

export const storyMethods: LocalMethods = { sendStory, sendPaymentNotification };

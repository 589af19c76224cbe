/**
 * Pins and admin deletes (signal-cli 0.14.0): sendPinMessage, sendUnpinMessage, sendAdminDelete.
 * Each is a data message carrying signal-cli's envelope field (`pinMessage`, `unpinMessage`,
 * `adminDelete`) with its target's author and sent timestamp. Pins go to recipients, groups or
 * this account; an admin delete goes to groups only, and only an admin of each may send it.
 */
import type { SendResult } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { optInt, type Params, strings } from '../params.js';
import { postToAll, reqNumber, reqTimestamp, targetAuthor, targets } from './interactions.js';
import type { LocalContext, LocalMethods } from './methods.js';

/** The target of a pin, an unpin or an admin delete. */
function target(ctx: LocalContext, p: Params) {
  const author = reqNumber(p, 'targetAuthor');
  return { ...targetAuthor(ctx, author), targetSentTimestamp: reqTimestamp(p, 'targetTimestamp') };
}

async function sendPinMessage(ctx: LocalContext, p: Params): Promise<SendResult> {
  const pinned = target(ctx, p);
  // As signal-cli: -1 (the default) pins for ever.
  const pinDurationSeconds = optInt(p, 'pinDuration') ?? -1;
  if (pinDurationSeconds < -1 || pinDurationSeconds === 0) {
    throw invalidParams(`pinDuration must be a number of seconds, or -1 for ever, got ${pinDurationSeconds}`);
  }
  const to = targets(ctx, p, true);
  return postToAll(ctx, to, { pinMessage: { ...pinned, pinDurationSeconds } }, 'pin message');
}

async function sendUnpinMessage(ctx: LocalContext, p: Params): Promise<SendResult> {
  const unpinMessage = target(ctx, p);
  const to = targets(ctx, p, true);
  return postToAll(ctx, to, { unpinMessage }, 'unpin message');
}

async function sendAdminDelete(ctx: LocalContext, p: Params): Promise<SendResult> {
  const adminDelete = target(ctx, p);
  const groupIds = strings(p, 'groupId');
  if (groupIds.length === 0) throw invalidParams('groupId is required: an admin delete is sent to groups');
  const to = targets(ctx, p);
  for (const g of to.groups) {
    const admin = ctx.store.members(g.groupId).some((m) => m.number === ctx.me.number && m.admin);
    if (!admin) throw userError(`Only group admins may delete others' messages in group ${g.groupId}`);
  }
  return postToAll(ctx, to, { adminDelete }, 'admin delete');
}

export const pinMethods: LocalMethods = { sendPinMessage, sendUnpinMessage, sendAdminDelete };

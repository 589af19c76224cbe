/** People: getUserStatus, listContacts, block and unblock (of numbers and of groups). */
import type { UserStatus } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, type Params, strings } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

function getUserStatus(ctx: LocalContext, p: Params): UserStatus[] {
  const recipients = numbers(p, 'recipient');
  if (recipients.length === 0) throw invalidParams('recipient is required');
  return recipients.map((number) => {
    const a = ctx.store.account(number);
    return { recipient: number, number, uuid: a?.uuid ?? null, isRegistered: a !== undefined, username: null };
  });
}

function listContacts(ctx: LocalContext, p: Params): unknown[] {
  const { store, me } = ctx;
  const wanted = numbers(p, 'recipient');
  const all = optBool(p, 'allRecipients');
  const onlyBlocked = p.blocked === true;
  const onlyUnblocked = p.blocked === false;
  const known = new Map(store.contacts(me.number).map((c) => [c.number, c.blocked]));
  let list = all
    ? store
        .accounts()
        .map((a) => a.number)
        .filter((n) => n !== me.number)
    : [...known.keys()];
  if (all) for (const n of known.keys()) if (!list.includes(n)) list.push(n);
  if (wanted.length > 0) list = list.filter((n) => wanted.includes(n));
  return list
    .map((number) => ({ number, blocked: known.get(number) ?? false, account: store.account(number) }))
    .filter((c) => !(onlyBlocked && !c.blocked) && !(onlyUnblocked && c.blocked))
    .map(({ number, blocked, account }) => ({
      number,
      uuid: account?.uuid ?? null,
      username: null,
      name: account?.profileName ?? '',
      givenName: null,
      familyName: null,
      nickName: null,
      note: null,
      color: null,
      isBlocked: blocked,
      isHidden: false,
      messageExpirationTime: 0,
      profileSharing: false,
      unregistered: account === undefined,
      profile: {
        lastUpdateTimestamp: 0,
        givenName: account?.profileName ?? null,
        familyName: null,
        about: null,
        aboutEmoji: null,
        hasAvatar: false,
        mobileCoinAddress: null,
      },
    }));
}

function setBlocked(ctx: LocalContext, p: Params, blocked: boolean): Record<string, never> {
  const recipients = numbers(p, 'recipient');
  const groupIds = strings(p, 'groupId');
  if (recipients.length === 0 && groupIds.length === 0) throw invalidParams('recipient or groupId is required');
  for (const number of recipients) ctx.store.setBlocked(ctx.me.number, number, blocked);
  for (const groupId of groupIds) {
    if (!ctx.store.group(groupId)) throw userError(`Invalid group id: ${groupId}`);
    ctx.store.setGroupBlocked(ctx.me.number, groupId, blocked);
  }
  return {};
}

export const contactMethods: LocalMethods = {
  getUserStatus,
  listContacts,
  block: (ctx, p) => setBlocked(ctx, p, true),
  unblock: (ctx, p) => setBlocked(ctx, p, false),
};

/**
 * getAvatar (signal-cli's, with exactly one of `contact`, `profile` or `groupId`): the avatar as
 * base64 `data`, as signal-cli returns it. A profile's avatar is set with updateProfile, a
 * group's with updateGroup's avatar; a contact's avatar is its profile's (the embedded network
 * has no contact-sync avatars). A group's avatar is given only to its members.
 */
import { invalidParams, userError } from '../errors.js';
import { numbers, optString, type Params } from '../params.js';
import { memberGroup } from './groups.js';
import type { LocalContext, LocalMethods } from './methods.js';

function getAvatar(ctx: LocalContext, p: Params): { data: string } {
  const given = (['contact', 'profile', 'groupId'] as const).filter((k) => p[k] !== undefined);
  if (given.length !== 1) throw invalidParams('exactly one of contact, profile or groupId is required');
  let data: Buffer | null | undefined;
  const groupId = optString(p, 'groupId');
  if (groupId !== undefined) {
    memberGroup(ctx, groupId);
    data = ctx.extras.groupAvatar(groupId);
  } else {
    const number = numbers(p, given[0]!)[0]!;
    if (!ctx.store.account(number)) throw userError(`The user ${number} is not registered.`);
    data = ctx.records.avatar(number);
  }
  if (!data) throw userError('Could not find avatar');
  return { data: data.toString('base64') };
}

export const avatarMethods: LocalMethods = { getAvatar };

/** The account itself and the network's accounts: updateProfile, sendSyncRequest, listAccounts. */
import { invalidParams } from '../errors.js';
import { optBool, optString, type Params } from '../params.js';
import { stagedAttachments } from './attachments.js';
import type { LocalContext, LocalMethods } from './methods.js';

/**
 * The profile others see: names (on envelopes' `sourceName` and in their `listContacts`), about
 * text and emoji, avatar (a file path or data URI, read as an attachment is). A parameter left
 * out keeps its value; an empty string clears it.
 */
async function updateProfile(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const { records, me } = ctx;
  const old = records.profile(me.number);
  const pick = (name: string, was: string | null | undefined) => {
    const v = optString(p, name);
    return v === undefined ? (was ?? null) : v === '' ? null : v;
  };
  const avatarSpec = optString(p, 'avatar');
  const removeAvatar = optBool(p, 'removeAvatar');
  if (avatarSpec !== undefined && removeAvatar) throw invalidParams('avatar and removeAvatar exclude each other');
  let avatar = removeAvatar ? null : records.avatar(me.number);
  if (avatarSpec !== undefined) {
    const { staged } = await stagedAttachments(ctx, [avatarSpec]);
    avatar = staged[0]!.data;
  }
  const profile = {
    givenName: pick('givenName', old ? old.givenName : me.profileName),
    familyName: pick('familyName', old?.familyName),
    about: pick('about', old?.about),
    aboutEmoji: pick('aboutEmoji', old?.aboutEmoji),
  };
  await ctx.store.write(() => records.setProfile(me.number, profile, avatar));
  return {};
}

export const accountMethods: LocalMethods = {
  updateProfile,
  // A local account has no other devices to ask: nothing to synchronise.
  sendSyncRequest: () => ({}),
  listAccounts: (ctx) => ctx.store.accounts().map((a) => ({ number: a.number })),
};

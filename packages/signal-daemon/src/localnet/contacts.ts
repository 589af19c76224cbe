/** People: getUserStatus, listContacts, updateContact, block and unblock (of numbers and of groups). */
import type { UserStatus } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, optInt, optString, type Params, strings } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';
import type { AccountRow } from './store.js';

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
  optBool(p, 'detailed'); // JSON output is always detailed, as in signal-cli
  const nameFilter = optString(p, 'name')?.toLowerCase();
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
    .map(({ number, blocked, account }) => contact(ctx, number, blocked, account))
    .filter(
      (c) =>
        !nameFilter || [c.name, c.nickName, c.profile.givenName].some((n) => n?.toLowerCase().includes(nameFilter)),
    );
}

const join = (...parts: (string | null | undefined)[]) => parts.filter(Boolean).join(' ') || null;

/** A contact as signal-cli's listContacts gives it: this account's details, the other's profile. */
function contact(ctx: LocalContext, number: string, blocked: boolean, account: AccountRow | undefined) {
  const d = ctx.records.contact(ctx.me.number, number);
  const profile = ctx.records.profile(number);
  return {
    number,
    uuid: account?.uuid ?? null,
    username: null,
    name: join(d?.givenName, d?.familyName) ?? ctx.displayName(number) ?? '',
    givenName: d?.givenName ?? null,
    familyName: d?.familyName ?? null,
    nickName: join(d?.nickGivenName, d?.nickFamilyName),
    nickGivenName: d?.nickGivenName ?? null,
    nickFamilyName: d?.nickFamilyName ?? null,
    note: d?.note ?? null,
    color: null,
    isBlocked: blocked,
    isHidden: false,
    messageExpirationTime: d?.expiration ?? 0,
    profileSharing: d?.request === 'accept',
    unregistered: account === undefined,
    profile: {
      lastUpdateTimestamp: profile?.updatedAt ?? 0,
      givenName: profile ? profile.givenName : (account?.profileName ?? null),
      familyName: profile?.familyName ?? null,
      about: profile?.about ?? null,
      aboutEmoji: profile?.aboutEmoji ?? null,
      hasAvatar: profile?.hasAvatar ?? false,
      mobileCoinAddress: null,
    },
  };
}

/** This account's own details of a contact (local to it, as in signal-cli); creates the contact. */
async function updateContact(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const recipient = numbers(p, 'recipient');
  if (recipient.length !== 1) throw invalidParams('recipient is required (one phone number)');
  const number = recipient[0]!;
  const expiration = optInt(p, 'expiration');
  if (expiration !== undefined && expiration < 0) throw invalidParams('expiration must be 0 or more seconds');
  const { records, store, me } = ctx;
  const old = records.contact(me.number, number);
  const pick = (name: string, was: string | null | undefined) => {
    const v = optString(p, name);
    return v === undefined ? (was ?? null) : v === '' ? null : v;
  };
  const details = {
    givenName: pick('givenName', old?.givenName),
    familyName: pick('familyName', old?.familyName),
    nickGivenName: pick('nickGivenName', old?.nickGivenName),
    nickFamilyName: pick('nickFamilyName', old?.nickFamilyName),
    note: pick('note', old?.note),
    expiration: expiration ?? old?.expiration ?? null,
    request: old?.request ?? null,
  };
  await store.write(() =>
    records.transaction(() => {
      store.addContact(me.number, number);
      records.setContact(me.number, number, details);
    }),
  );
  return {};
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

/**
 * Removes a contact from this account's list (signal-cli's removeContact): `hide` hides it (the
 * conversation stays), `forget` also drops this account's names and settings for it; without
 * either, as signal-cli, the contact's names are cleared and it leaves the list.
 */
async function removeContact(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const number = numbers(p, 'recipient')[0];
  if (!number) throw invalidParams('recipient is required');
  if (optBool(p, 'hide') && optBool(p, 'forget')) throw invalidParams('hide and forget exclude each other');
  const { store, records, me } = ctx;
  const keepDetails = optBool(p, 'hide');
  await store.write(() =>
    records.transaction(() => {
      store.removeContact(me.number, number);
      if (!keepDetails && records.contact(me.number, number)) {
        const none = { givenName: null, familyName: null, nickGivenName: null, nickFamilyName: null, note: null };
        records.setContact(me.number, number, { ...none, expiration: null, request: null });
      }
    }),
  );
  return {};
}

export const contactMethods: LocalMethods = {
  removeContact,
  getUserStatus,
  listContacts,
  updateContact,
  block: (ctx, p) => setBlocked(ctx, p, true),
  unblock: (ctx, p) => setBlocked(ctx, p, false),
};

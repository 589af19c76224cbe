/**
 * Groups: updateGroup (create, rename, members, admins, invite link, permissions, timer),
 * joinGroup (by invite link), quitGroup and listGroups.
 */
import { randomBytes } from 'node:crypto';
import type { DataMessage, GroupInfo, RecipientAddress } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, optInt, optString, type Params, reqString, strings } from '../params.js';
import { stagedAttachments } from './attachments.js';
import type { LocalContext, LocalMethods } from './methods.js';
import type { GroupSettings } from './records.js';
import type { GroupRow } from './store.js';

const LINK_PREFIX = 'https://signal.group/#';

/** The group, when this account is a member of it; else -1 as signal-cli. */
export function memberGroup(ctx: LocalContext, groupId: string): GroupRow {
  const group = ctx.store.group(groupId);
  if (!group) throw userError(`Invalid group id: ${groupId}`);
  if (!ctx.store.members(groupId).some((m) => m.number === ctx.me.number)) {
    throw userError(`You are not a member of group ${groupId}`);
  }
  return group;
}

function registered(ctx: LocalContext, list: readonly string[], role: string): void {
  const missing = list.filter((n) => !ctx.store.account(n));
  if (missing.length > 0) throw userError(`Cannot add ${role}: not registered: ${missing.join(', ')}`);
}

function permission(p: Params, name: string): string | undefined {
  const v = optString(p, name);
  if (v === undefined) return undefined;
  const norm = v.replace(/[-_]/g, '').toLowerCase();
  if (norm === 'everymember') return 'EVERY_MEMBER';
  if (norm === 'onlyadmins') return 'ONLY_ADMINS';
  throw invalidParams(`${name} must be every-member or only-admins`);
}

function linkState(p: Params): 'ENABLED' | 'DISABLED' | undefined {
  const v = optString(p, 'link');
  if (v === undefined) return undefined;
  const norm = v.replace(/[-_]/g, '').toLowerCase();
  if (norm === 'enabled') return 'ENABLED';
  if (norm === 'disabled') return 'DISABLED';
  if (norm === 'enabledwithapproval')
    throw invalidParams('link enabled-with-approval is not supported by the local network');
  throw invalidParams('link must be enabled or disabled');
}

/** Tells the members (and those just removed) of a change, as a group update message. */
async function announce(ctx: LocalContext, id: string, timestamp: number, alsoTo: readonly string[] = []) {
  const group = ctx.store.group(id)!;
  const others = ctx.store
    .members(id)
    .filter((m) => m.number !== ctx.me.number)
    .map((m) => m.number);
  const info = { groupId: id, groupName: group.name, revision: group.revision, type: 'UPDATE' };
  const dataMessage: DataMessage = { timestamp, message: null, expiresInSeconds: 0, viewOnce: false, groupInfo: info };
  return ctx.post([...others, ...alsoTo], ctx.envelope(timestamp, { dataMessage }));
}

async function updateGroup(ctx: LocalContext, p: Params): Promise<{ groupId: string; timestamp: number }> {
  const { store, me, records } = ctx;
  const groupId = optString(p, 'groupId');
  const name = optString(p, 'name');
  const description = optString(p, 'description');
  const add = numbers(p, 'member');
  const remove = numbers(p, 'removeMember');
  const admins = numbers(p, 'admin');
  const removeAdmins = numbers(p, 'removeAdmin');
  const expiration = optInt(p, 'expiration');
  const avatarSpec = optString(p, 'avatar');
  if (expiration !== undefined && expiration < 0) throw invalidParams('expiration must be 0 or more seconds');
  const link = linkState(p);
  const resetLink = optBool(p, 'resetLink');
  const perms = {
    addMember: permission(p, 'setPermissionAddMember'),
    editDetails: permission(p, 'setPermissionEditDetails'),
    sendMessages: permission(p, 'setPermissionSendMessages'),
  };
  registered(ctx, add, 'members');
  const before = groupId === undefined ? undefined : memberGroup(ctx, groupId);
  const old = groupId === undefined ? records.settings('') : records.settings(groupId);
  if (before && groupId) {
    const members = store.members(groupId);
    const admin = members.some((m) => m.number === me.number && m.admin);
    const set = new Set(members.map((m) => m.number));
    const notMembers = [...admins, ...removeAdmins].filter((n) => !set.has(n) && !add.includes(n));
    if (notMembers.length > 0) throw userError(`Not members of the group: ${notMembers.join(', ')}`);
    const needsAdmin = [
      remove.length > 0 && 'removeMember',
      admins.length > 0 && 'admin',
      removeAdmins.length > 0 && 'removeAdmin',
      link !== undefined && 'link',
      resetLink && 'resetLink',
      perms.addMember && 'setPermissionAddMember',
      perms.editDetails && 'setPermissionEditDetails',
      perms.sendMessages && 'setPermissionSendMessages',
      add.length > 0 && old.addMember === 'ONLY_ADMINS' && 'member',
      (name !== undefined || description !== undefined || expiration !== undefined || avatarSpec !== undefined) &&
        old.editDetails === 'ONLY_ADMINS' &&
        'name, description, avatar or expiration',
    ].filter(Boolean);
    if (!admin && needsAdmin.length > 0) throw userError(`Only group admins may change ${needsAdmin.join(', ')}`);
  }
  const state = link ?? old.linkState;
  const settings: GroupSettings = {
    linkState: state,
    linkPassword:
      resetLink || (state === 'ENABLED' && !old.linkPassword)
        ? randomBytes(16).toString('base64url')
        : old.linkPassword,
    addMember: perms.addMember ?? old.addMember,
    editDetails: perms.editDetails ?? old.editDetails,
    sendMessages: perms.sendMessages ?? old.sendMessages,
    expiration: expiration ?? old.expiration,
  };
  // The avatar is read (a path passes the attachment checks) before anything is written.
  const avatar = avatarSpec === undefined ? undefined : (await stagedAttachments(ctx, [avatarSpec])).staged[0]!.data;
  const timestamp = ctx.nextTimestamp();
  const id = groupId ?? randomBytes(32).toString('base64');
  await store.write(() =>
    records.transaction(() => {
      if (avatar) ctx.extras.setGroupAvatar(id, avatar);
      if (!before) store.createGroup(id, name ?? '', description ?? null, me.number, add);
      else {
        store.changeGroup(id, {
          name: name ?? before.name,
          description: description ?? before.description,
          add,
          remove,
          admins,
          removeAdmins,
        });
      }
      records.setSettings(id, settings);
    }),
  );
  await announce(ctx, id, timestamp, remove);
  return { groupId: id, timestamp };
}

async function joinGroup(ctx: LocalContext, p: Params): Promise<{ groupId: string; timestamp: number }> {
  const uri = reqString(p, 'uri');
  if (!uri.startsWith(LINK_PREFIX)) throw invalidParams(`uri must be a group invite link (${LINK_PREFIX}…)`);
  const id = ctx.records.groupByLink(uri.slice(LINK_PREFIX.length));
  if (!id) throw userError('Group link is not valid (unknown, reset or disabled)');
  const group = ctx.store.group(id)!;
  const timestamp = ctx.nextTimestamp();
  if (!ctx.store.members(id).some((m) => m.number === ctx.me.number)) {
    await ctx.store.write(() =>
      ctx.records.transaction(() => {
        const change = { name: group.name, description: group.description, remove: [], admins: [], removeAdmins: [] };
        ctx.store.changeGroup(id, { ...change, add: [ctx.me.number] });
        ctx.records.forgetGroup(ctx.me.number, id);
      }),
    );
    await announce(ctx, id, timestamp);
  }
  return { groupId: id, timestamp };
}

/** Leaves a group (telling the members); `forget` drops it from this account's list too. */
export async function quitGroupOf(ctx: LocalContext, groupId: string, forget: boolean) {
  const { store, records, me } = ctx;
  const group = store.group(groupId);
  if (!group) throw userError(`Invalid group id: ${groupId}`);
  const member = store.members(groupId).some((m) => m.number === me.number);
  if (!member && !records.groupsLeft(me.number).includes(groupId)) {
    throw userError(`You are not a member of group ${groupId}`);
  }
  const timestamp = ctx.nextTimestamp();
  await store.write(() =>
    records.transaction(() => {
      if (member) {
        const change = { name: group.name, description: group.description, add: [], admins: [], removeAdmins: [] };
        store.changeGroup(groupId, { ...change, remove: [me.number] });
      }
      if (forget) records.forgetGroup(me.number, groupId);
      else records.leaveGroup(me.number, groupId);
    }),
  );
  const results = member ? await announce(ctx, groupId, timestamp) : [];
  return { timestamp, results };
}

function quitGroup(ctx: LocalContext, p: Params) {
  return quitGroupOf(ctx, reqString(p, 'groupId'), optBool(p, 'delete'));
}

function listGroups(ctx: LocalContext, p: Params): GroupInfo[] {
  const { store, me, records } = ctx;
  const wanted = strings(p, 'groupId');
  const address = (m: { number: string; uuid: string }): RecipientAddress => ({ number: m.number, uuid: m.uuid });
  const left = records
    .groupsLeft(me.number)
    .map((id) => store.group(id))
    .filter((g): g is GroupRow => g !== undefined);
  return [...store.groupsOf(me.number), ...left]
    .filter((g) => wanted.length === 0 || wanted.includes(g.id))
    .map((g) => {
      const members = store.members(g.id);
      const isMember = members.some((m) => m.number === me.number);
      const s = records.settings(g.id);
      return {
        id: g.id,
        name: g.name,
        description: g.description,
        isMember,
        isBlocked: store.isGroupBlocked(me.number, g.id),
        messageExpirationTime: s.expiration,
        members: members.map(address),
        pendingMembers: [],
        requestingMembers: [],
        admins: members.filter((m) => m.admin).map(address),
        banned: [],
        permissionAddMember: s.addMember,
        permissionEditDetails: s.editDetails,
        permissionSendMessage: s.sendMessages,
        groupInviteLink: isMember && s.linkState === 'ENABLED' && s.linkPassword ? LINK_PREFIX + s.linkPassword : null,
      };
    });
}

/**
 * Ends a group for every member (signal-cli 0.14.8's terminateGroup; admins only): the members
 * get a group update, then none is a member any more, so no one can send to it again.
 */
async function terminateGroup(ctx: LocalContext, p: Params): Promise<{ groupId: string; timestamp: number }> {
  const groupId = reqString(p, 'groupId');
  const group = memberGroup(ctx, groupId);
  const members = ctx.store.members(groupId);
  if (!members.some((m) => m.number === ctx.me.number && m.admin)) {
    throw userError(`Only group admins may terminate group ${groupId}`);
  }
  const timestamp = ctx.nextTimestamp();
  const others = members.filter((m) => m.number !== ctx.me.number).map((m) => m.number);
  const info = { groupId, groupName: group.name, revision: group.revision + 1, type: 'UPDATE' };
  const dataMessage: DataMessage = { timestamp, message: null, expiresInSeconds: 0, viewOnce: false, groupInfo: info };
  const all = members.map((m) => m.number);
  const change = { name: group.name, description: group.description, add: [], admins: [], removeAdmins: [] };
  let ended = false;
  const end = () => {
    ctx.store.changeGroup(groupId, { ...change, remove: all });
    ended = true;
  };
  await ctx.post(others, ctx.envelope(timestamp, { dataMessage }), { alsoInTransaction: end });
  // Nobody to tell (or nobody reachable): the group ends all the same.
  if (!ended) await ctx.store.write(end);
  return { groupId, timestamp };
}

export const groupMethods: LocalMethods = { updateGroup, joinGroup, quitGroup, listGroups, terminateGroup };

/** Groups: updateGroup (create, rename, members, admins) and listGroups. */
import { randomBytes } from 'node:crypto';
import type { DataMessage, GroupInfo, RecipientAddress } from '@vigil/shared-types';
import { userError } from '../errors.js';
import { numbers, optString, type Params, strings } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';
import type { GroupRow } from './store.js';

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

async function updateGroup(ctx: LocalContext, p: Params): Promise<{ groupId: string; timestamp: number }> {
  const { store, me } = ctx;
  const groupId = optString(p, 'groupId');
  const name = optString(p, 'name');
  const description = optString(p, 'description');
  const add = numbers(p, 'member');
  const remove = numbers(p, 'removeMember');
  const admins = numbers(p, 'admin');
  const removeAdmins = numbers(p, 'removeAdmin');
  registered(ctx, add, 'members');
  const timestamp = ctx.nextTimestamp();
  let id: string;
  if (groupId === undefined) {
    id = randomBytes(32).toString('base64');
    store.createGroup(id, name ?? '', description ?? null, me.number, add);
  } else {
    const group = memberGroup(ctx, groupId);
    const members = new Set(store.members(groupId).map((m) => m.number));
    const notMembers = [...admins, ...removeAdmins].filter((n) => !members.has(n) && !add.includes(n));
    if (notMembers.length > 0) throw userError(`Not members of the group: ${notMembers.join(', ')}`);
    store.changeGroup(groupId, {
      name: name ?? group.name,
      description: description ?? group.description,
      add,
      remove,
      admins,
      removeAdmins,
    });
    id = groupId;
  }
  const group = store.group(id)!;
  const others = store
    .members(id)
    .filter((m) => m.number !== me.number)
    .map((m) => m.number);
  // Members (and those just removed) learn of the change as a group update message.
  const info = { groupId: id, groupName: group.name, revision: group.revision, type: 'UPDATE' };
  const dataMessage: DataMessage = {
    timestamp,
    message: null,
    expiresInSeconds: 0,
    viewOnce: false,
    groupInfo: info,
  };
  await ctx.post([...others, ...remove], ctx.envelope(timestamp, { dataMessage }));
  return { groupId: id, timestamp };
}

function listGroups(ctx: LocalContext, p: Params): GroupInfo[] {
  const { store, me } = ctx;
  const address = (m: { number: string; uuid: string }): RecipientAddress => ({ number: m.number, uuid: m.uuid });
  const only = strings(p, 'groupId');
  const groups = store.groupsOf(me.number).filter((g) => only.length === 0 || only.includes(g.id));
  return groups.map((g) => {
    const members = store.members(g.id);
    return {
      id: g.id,
      name: g.name,
      description: g.description,
      isMember: true,
      isBlocked: store.isGroupBlocked(me.number, g.id),
      messageExpirationTime: 0,
      members: members.map(address),
      pendingMembers: [],
      requestingMembers: [],
      admins: members.filter((m) => m.admin).map(address),
      banned: [],
      permissionAddMember: 'EVERY_MEMBER',
      permissionEditDetails: 'EVERY_MEMBER',
      permissionSendMessage: 'EVERY_MEMBER',
      groupInviteLink: null,
    };
  });
}

export const groupMethods: LocalMethods = { updateGroup, listGroups };

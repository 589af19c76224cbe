/**
 * What is said about earlier messages and conversations: sendReaction (and its removal),
 * remoteDelete, sendMessageRequestResponse; and the helpers that polls.ts and pins.ts share. A
 * reaction is sent whether or not this account has seen its target, as signal-cli sends it (the
 * recipient's client decides); a remote delete must point at a message this account sent, else
 * -1, and nothing is sent.
 */
import type { SendResult, SendResultEntry } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, optString, type Params, strings, timestamps } from '../params.js';
import { quitGroupOf } from './groups.js';
import { dataMessage, finishSend, sendableGroups, sentMessage } from './messages.js';
import type { LocalContext, LocalMethods } from './methods.js';

/** Whom a message goes to: recipients, groups (checked: a member, allowed to send), and this account with noteToSelf. */
export function targets(ctx: LocalContext, p: Params, selfAllowed = false) {
  const given = numbers(p, 'recipient');
  const toSelf = selfAllowed && (optBool(p, 'noteToSelf') || given.includes(ctx.me.number));
  const recipients = selfAllowed ? given.filter((n) => n !== ctx.me.number) : given;
  const groups = sendableGroups(ctx, strings(p, 'groupId'));
  if (recipients.length === 0 && groups.length === 0 && !toSelf) {
    throw invalidParams(
      selfAllowed ? 'recipient, groupId or noteToSelf is required' : 'recipient or groupId is required',
    );
  }
  return { recipients, groups, toSelf };
}

/** A required number parameter (e.g. targetAuthor), in E.164 form. */
export function reqNumber(p: Params, name: string): string {
  const n = numbers(p, name)[0];
  if (!n) throw invalidParams(`${name} is required`);
  return n;
}

export function reqTimestamp(p: Params, name: string): number {
  const t = timestamps(p, name);
  if (t.length !== 1) throw invalidParams(`${name} is required (one message timestamp)`);
  return t[0]!;
}

/** An account as the target fields of a reaction, pin or admin delete name it. */
export function targetAuthor(ctx: LocalContext, number: string) {
  return {
    targetAuthor: number,
    targetAuthorNumber: number,
    targetAuthorUuid: ctx.store.account(number)?.uuid ?? null,
  };
}

/** Posts one data message to the recipients, groups and (as a sync message) this account; send-shaped result. */
export async function postToAll(
  ctx: LocalContext,
  to: ReturnType<typeof targets>,
  fields: Omit<Parameters<typeof dataMessage>[0], 'timestamp' | 'groupInfo'>,
  what: string,
): Promise<SendResult> {
  const timestamp = ctx.nextTimestamp();
  const results: SendResultEntry[] = [];
  if (to.recipients.length > 0) {
    const dm = dataMessage({ timestamp, ...fields });
    results.push(...(await ctx.post(to.recipients, ctx.envelope(timestamp, { dataMessage: dm }))));
  }
  for (const g of to.groups) {
    const dm = dataMessage({ timestamp, ...fields, expiresInSeconds: g.expiration, groupInfo: g.info });
    results.push(...(await ctx.post(g.others, ctx.envelope(timestamp, { dataMessage: dm }))));
  }
  if (to.toSelf) {
    const syncMessage = sentMessage(ctx, ctx.me.number, dataMessage({ timestamp, ...fields }));
    results.push(...(await ctx.post([ctx.me.number], ctx.envelope(timestamp, { syncMessage }))));
  }
  return finishSend(timestamp, results, what);
}

async function sendReaction(ctx: LocalContext, p: Params): Promise<SendResult> {
  const to = targets(ctx, p);
  const emoji = optString(p, 'emoji');
  if (!emoji) throw invalidParams('emoji is required');
  const author = reqNumber(p, 'targetAuthor');
  const targetSentTimestamp = reqTimestamp(p, 'targetTimestamp');
  // Sent whether or not this account has seen the target: the recipient's client decides.
  const reaction = { emoji, ...targetAuthor(ctx, author), targetSentTimestamp, isRemove: optBool(p, 'remove') };
  return postToAll(ctx, to, { reaction }, 'reaction');
}

async function remoteDelete(ctx: LocalContext, p: Params): Promise<SendResult> {
  const to = targets(ctx, p);
  const timestamp = reqTimestamp(p, 'targetTimestamp');
  if (ctx.records.sentBy(ctx.me.number, timestamp).length === 0) {
    throw userError(`Message to delete not found: this account sent none at ${timestamp}`);
  }
  return postToAll(ctx, to, { remoteDelete: { timestamp } }, 'remote delete');
}

/**
 * The answer to a message request, kept for this account: `accept` marks the contact as one this
 * account shares its profile with (and unblocks it); `delete` removes the conversation (the
 * contact from the list; for a group, leaves it and drops it).
 */
async function sendMessageRequestResponse(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const type = optString(p, 'type');
  if (type !== 'accept' && type !== 'delete') throw invalidParams('type must be accept or delete');
  const recipients = numbers(p, 'recipient');
  const groupIds = strings(p, 'groupId');
  if (recipients.length === 0 && groupIds.length === 0) throw invalidParams('recipient or groupId is required');
  for (const g of groupIds) if (!ctx.store.group(g)) throw userError(`Invalid group id: ${g}`);
  const { store, records, me } = ctx;
  await store.write(() =>
    records.transaction(() => {
      for (const n of recipients) {
        const c = records.contact(me.number, n);
        const base = c ?? {
          givenName: null,
          familyName: null,
          nickGivenName: null,
          nickFamilyName: null,
          note: null,
          expiration: null,
          request: null,
        };
        records.setContact(me.number, n, { ...base, request: type });
        if (type === 'accept') {
          store.setBlocked(me.number, n, false);
        } else {
          store.removeContact(me.number, n);
        }
      }
    }),
  );
  if (type === 'delete') for (const g of groupIds) await quitGroupOf(ctx, g, true);
  return {};
}

export const interactionMethods: LocalMethods = { sendReaction, remoteDelete, sendMessageRequestResponse };

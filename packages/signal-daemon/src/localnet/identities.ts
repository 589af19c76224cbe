/** Identity keys: listIdentities and trust (see identity.ts for how keys change and are trusted). */
import type { IdentityEntry } from '@vigil/shared-types';
import { invalidParams, userError } from '../errors.js';
import { numbers, optBool, optString, type Params } from '../params.js';
import { identityEntry, safetyNumber } from './identity.js';
import type { LocalContext, LocalMethods } from './methods.js';

function listIdentities(ctx: LocalContext, p: Params): IdentityEntry[] {
  const only = numbers(p, 'number')[0];
  const me = { number: ctx.me.number, key: ctx.identityKey };
  return ctx.records
    .trustedNumbers(ctx.me.number)
    .filter((n) => only === undefined || n === only)
    .flatMap((number) => {
      const account = ctx.store.account(number);
      const entry = account && identityEntry(ctx.records, me, account);
      return entry ? [entry] : [];
    });
}

/**
 * Trusts a recipient's current identity key: with `trustAllKnownKeys` (unverified), or with the
 * safety number compared out of band (`verifiedSafetyNumber`: digits, or the scannable base64).
 */
async function trust(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const number = numbers(p, 'recipient')[0];
  if (!number) throw invalidParams('recipient is required');
  const all = optBool(p, 'trustAllKnownKeys');
  const verified = optString(p, 'verifiedSafetyNumber');
  if (!all && verified === undefined) {
    throw invalidParams('give trustAllKnownKeys or verifiedSafetyNumber');
  }
  const key = ctx.records.identity(number);
  if (!key) throw userError(`No identity key known for ${number}`);
  let level = 'TRUSTED_UNVERIFIED';
  if (verified !== undefined) {
    const expected = safetyNumber({ number: ctx.me.number, key: ctx.identityKey }, { number, key });
    const given = verified.replace(/\s/g, '');
    if (given !== expected && given !== Buffer.from(expected).toString('base64')) {
      throw userError(`Safety number for ${number} does not match the current identity key`);
    }
    level = 'TRUSTED_VERIFIED';
  }
  await ctx.store.write(() => ctx.records.setTrust(ctx.me.number, number, key, level));
  return {};
}

export const identityMethods: LocalMethods = { listIdentities, trust };

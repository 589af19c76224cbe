/**
 * What signal-cli keeps for an account on Signal's servers, kept in the network file instead:
 * setPin and removePin (the registration lock PIN, stored as a salted scrypt hash), updateAccount
 * (this device's name and the account's privacy flags), updateConfiguration (read receipts,
 * typing and unidentified-delivery indicators, link previews); and what has nothing to do on the
 * embedded network: submitRateLimitChallenge (it never rate-limits: accepted, does nothing),
 * sendContacts (an account's daemons read its contacts from the one file: nothing to send), and
 * registration (register, verify, unregister, change of number, deleteLocalAccountData), refused
 * with -1: an account is registered by starting its daemon with --account.
 */
import { randomBytes, scryptSync } from 'node:crypto';
import { invalidParams, userError } from '../errors.js';
import { type Params, reqString } from '../params.js';
import type { LocalContext, LocalMethods } from './methods.js';

const NO_REGISTRATION =
  'Registration is not supported by the embedded network: an account is registered by starting its daemon with --account';

/** The flags each method stores, by their camelCase names (values: true or false). */
const ACCOUNT_FLAGS = ['unrestrictedUnidentifiedSender', 'discoverableByNumber', 'numberSharing'] as const;
const CONFIGURATION_FLAGS = [
  'readReceipts',
  'unidentifiedDeliveryIndicators',
  'typingIndicators',
  'linkPreviews',
] as const;

/** Writes settings (null clears one) in one transaction. */
async function store(ctx: LocalContext, values: Record<string, string | null>): Promise<void> {
  const { extras, me } = ctx;
  await ctx.store.write(() =>
    extras.transaction(() => {
      for (const [key, value] of Object.entries(values)) extras.setSetting(me.number, key, value);
    }),
  );
}

/** The flags given (already type-checked by the resolver), as stored values. */
function flags(p: Params, names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) if (typeof p[n] === 'boolean') out[n] = String(p[n]);
  return out;
}

async function setPin(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const pin = reqString(p, 'pin');
  if (pin.length < 4) throw invalidParams('pin must be at least 4 characters');
  const salt = randomBytes(16);
  const hash = scryptSync(pin, salt, 32);
  await store(ctx, { pinHash: `scrypt:${salt.toString('base64')}:${hash.toString('base64')}` });
  return {};
}

async function updateAccount(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  const values: Record<string, string | null> = flags(p, ACCOUNT_FLAGS);
  if (typeof p.deviceName === 'string') values.deviceName = p.deviceName;
  await store(ctx, values);
  return {};
}

async function updateConfiguration(ctx: LocalContext, p: Params): Promise<Record<string, never>> {
  await store(ctx, flags(p, CONFIGURATION_FLAGS));
  return {};
}

const refuseRegistration = (): never => {
  throw userError(NO_REGISTRATION);
};

export const settingMethods: LocalMethods = {
  setPin,
  removePin: async (ctx) => {
    await store(ctx, { pinHash: null });
    return {};
  },
  updateAccount,
  updateConfiguration,
  // The embedded network never rate-limits: there is no challenge to answer.
  submitRateLimitChallenge: (_ctx, p) => {
    reqString(p, 'challenge');
    reqString(p, 'captcha');
    return {};
  },
  sendContacts: () => ({}),
  register: refuseRegistration,
  verify: refuseRegistration,
  unregister: refuseRegistration,
  deleteLocalAccountData: refuseRegistration,
  startChangeNumber: refuseRegistration,
  finishChangeNumber: refuseRegistration,
};

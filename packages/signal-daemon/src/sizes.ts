/**
 * What one call may carry (MESSAGING_LIMITS of shared-types): the text fields of every method (a
 * message, names, descriptions, about, poll and sticker text) in bytes of UTF-8, and the number of
 * attachments. Checked before a call reaches either backend, on the params as the client sent
 * them (camelCase or dashed, singular or plural), so that nothing over a limit is stored, sent on
 * or put in a consumer's stream. A value over its limit is a -32602 naming the parameter as the
 * client spelled it.
 */
import { MESSAGING_LIMITS, paramTooLarge } from '@vigil/shared-types';
import { RpcFailure } from './errors.js';

export type MessagingLimits = { readonly [K in keyof typeof MESSAGING_LIMITS]: number };

type TextLimit = Exclude<keyof MessagingLimits, 'attachments' | 'batchRequests'>;

/** Each bounded text parameter (camelCase, singular) and its limit. */
const TEXT_FIELDS: Readonly<Record<string, TextLimit>> = {
  message: 'messageBytes',
  quoteMessage: 'messageBytes',
  name: 'nameBytes',
  givenName: 'nameBytes',
  familyName: 'nameBytes',
  nickGivenName: 'nameBytes',
  nickFamilyName: 'nameBytes',
  deviceName: 'nameBytes',
  description: 'descriptionBytes',
  note: 'descriptionBytes',
  previewTitle: 'descriptionBytes',
  previewDescription: 'descriptionBytes',
  about: 'aboutBytes',
  aboutEmoji: 'aboutBytes',
  question: 'shortTextBytes',
  option: 'shortTextBytes',
  pollOption: 'shortTextBytes',
  emoji: 'shortTextBytes',
  sticker: 'shortTextBytes',
};

/** `group-name` → `groupName`; a plural list name → its singular (`attachments` → `attachment`). */
function canonical(key: string): string {
  if (Object.hasOwn(TEXT_FIELDS, key) || key === 'attachment') return key;
  const camel = key.includes('-') ? key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase()) : key;
  if (Object.hasOwn(TEXT_FIELDS, camel) || camel === 'attachment') return camel;
  const singular = camel.endsWith('s') ? camel.slice(0, -1) : camel;
  return Object.hasOwn(TEXT_FIELDS, singular) || singular === 'attachment' ? singular : camel;
}

/** Throws RpcFailure (-32602) for the first parameter over its limit; params of any other shape pass. */
export function checkSizes(params: unknown, limits: MessagingLimits = MESSAGING_LIMITS): void {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return;
  const given = params as Record<string, unknown>;
  for (const key in given) {
    if (!Object.hasOwn(given, key)) continue;
    const value = given[key];
    const name = canonical(key);
    if (name === 'attachment') {
      const n = Array.isArray(value) ? value.length : value === undefined || value === null ? 0 : 1;
      if (n > limits.attachments) fail(paramTooLarge(key, n, limits.attachments, 'attachments'));
      continue;
    }
    const limit = TEXT_FIELDS[name];
    if (limit === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v !== 'string') continue;
      // A string's UTF-8 length is at most 3 bytes per UTF-16 unit: most need no count.
      if (v.length * 3 <= limits[limit]) continue;
      const size = Buffer.byteLength(v, 'utf8');
      if (size > limits[limit]) fail(paramTooLarge(key, size, limits[limit]));
    }
  }
}

function fail(error: ReturnType<typeof paramTooLarge>): never {
  throw new RpcFailure(error.code, error.message, error.data);
}

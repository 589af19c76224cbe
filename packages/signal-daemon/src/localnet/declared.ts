/**
 * The parameters signal-cli 0.13.19 documents for each method the local network answers
 * (`man1/signal-cli.1`, `man5/signal-cli-jsonrpc.5`), split into those the local network honours
 * and those it refuses with -32602 naming them. Nothing documented is silently ignored; keys that
 * are not documented (e.g. `account` on a one-account daemon) are ignored, as signal-cli ignores
 * them. A list parameter is read under its singular and its plural name.
 */

export interface DeclaredParam {
  /** signal-cli's name (its argument's destination), camelCase and singular: `recipient`, `groupId`. */
  readonly name: string;
  /** One value or an array; the methods read it as an array under `key`. */
  readonly list: boolean;
  /** Where the methods read it: the plural for a list (`recipients`), else the name. */
  readonly key: string;
  /** Further names signal-cli accepts for it (`name` for updateProfile's `givenName`). */
  readonly aliases: readonly string[];
}

export interface DeclaredMethod {
  readonly honoured: readonly DeclaredParam[];
  /** Documented, not available on the local network: a value other than null/false is -32602. */
  readonly refused: readonly string[];
}

const one = (name: string, ...aliases: string[]): DeclaredParam => ({ name, list: false, key: name, aliases });
const many = (name: string): DeclaredParam => ({ name, list: true, key: `${name}s`, aliases: [] });
const m = (honoured: DeclaredParam[], refused: string[] = []): DeclaredMethod => ({ honoured, refused });

const RECIPIENTS = many('recipient');
const GROUP_IDS = many('groupId');

export const DECLARED: Readonly<Record<string, DeclaredMethod>> = {
  send: m(
    [
      RECIPIENTS,
      one('noteToSelf'),
      GROUP_IDS,
      one('message'),
      many('attachment'),
      one('viewOnce'),
      many('mention'),
      many('textStyle'),
      one('quoteTimestamp'),
      one('quoteAuthor'),
      one('quoteMessage'),
      many('quoteMention'),
      many('quoteTextStyle'),
      one('previewUrl'),
      one('previewTitle'),
      one('previewDescription'),
      one('editTimestamp'),
    ],
    [
      'username',
      'messageFromStdin',
      'sticker',
      'quoteAttachment',
      'previewImage',
      'storyTimestamp',
      'storyAuthor',
      'endSession',
    ],
  ),
  sendReceipt: m([RECIPIENTS, many('targetTimestamp'), one('type')]),
  sendTyping: m([RECIPIENTS, GROUP_IDS, one('stop')]),
  sendReaction: m(
    [RECIPIENTS, GROUP_IDS, one('emoji'), one('targetAuthor'), one('targetTimestamp'), one('remove')],
    ['username', 'story'],
  ),
  remoteDelete: m([RECIPIENTS, GROUP_IDS, one('targetTimestamp')], ['username']),
  sendMessageRequestResponse: m([RECIPIENTS, GROUP_IDS, one('type')], ['username']),
  getAttachment: m([one('id'), one('recipient'), one('groupId')]),
  getUserStatus: m([RECIPIENTS], ['username']),
  listContacts: m([RECIPIENTS, one('allRecipients'), one('blocked'), one('name'), one('detailed')], ['internal']),
  updateContact: m([
    one('recipient'),
    one('givenName', 'name'),
    one('familyName'),
    one('nickGivenName'),
    one('nickFamilyName'),
    one('note'),
    one('expiration'),
  ]),
  block: m([RECIPIENTS, GROUP_IDS]),
  unblock: m([RECIPIENTS, GROUP_IDS]),
  listIdentities: m([one('number')]),
  trust: m([one('recipient'), one('trustAllKnownKeys'), one('verifiedSafetyNumber')]),
  updateProfile: m(
    [one('givenName', 'name'), one('familyName'), one('about'), one('aboutEmoji'), one('avatar'), one('removeAvatar')],
    ['mobileCoinAddress', 'mobilecoinAddress'],
  ),
  updateGroup: m(
    [
      one('groupId'),
      one('name'),
      one('description'),
      many('member'),
      many('removeMember'),
      many('admin'),
      many('removeAdmin'),
      one('resetLink'),
      one('link'),
      one('setPermissionAddMember'),
      one('setPermissionEditDetails'),
      one('setPermissionSendMessages'),
      one('expiration'),
    ],
    ['avatar', 'ban', 'unban'],
  ),
  joinGroup: m([one('uri')]),
  quitGroup: m([one('groupId'), one('delete')]),
  listGroups: m([GROUP_IDS, one('detailed')]),
  sendSyncRequest: m([]),
  startLink: m([]),
  finishLink: m([one('deviceLinkUri'), one('deviceName')]),
  addDevice: m([one('uri')]),
  listDevices: m([]),
  listAccounts: m([]),
};

/** `quoteTimestamp` → `quote-timestamp`, as on signal-cli's command line. */
export function dashed(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

/** Every name a parameter is found under: camelCase or dashed; singular or plural for a list. */
export function spellings(p: DeclaredParam): string[] {
  const names = [p.name, ...p.aliases, ...(p.list ? [`${p.name}s`] : [])];
  return [...new Set(names.flatMap((n) => [n, dashed(n)]))];
}

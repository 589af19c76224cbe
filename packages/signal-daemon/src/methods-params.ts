/**
 * The documented parameters of each method of the embedded network, as signal-cli 0.13.19's man
 * pages give them (`man1/signal-cli.1`, `man5/signal-cli-jsonrpc.5`) and, for 0.14's methods,
 * its command classes (`src/main/java/org/asamk/signal/commands/*Command.java`): the resolver (params.ts)
 * finds each one under its camelCase or dashed name, a list under its singular or plural name, and
 * checks its type; every other key is ignored, as signal-cli ignores it.
 *
 * The key of an entry is the camelCase form of signal-cli's own name (its argument's `dest`, e.g.
 * `--group-id` → `groupId`, `--member` → `member`): the method reads the resolved value under that
 * key, a list always as an array. A parameter the embedded network does not honour is declared
 * with `refused`: given with a value, the call is refused with -32602 naming it, never ignored.
 * A method of the embedded network must have an entry here (a test checks it).
 */

export type ParamType =
  /** A non-empty string. */
  | 'string'
  /** A string, also empty (e.g. a profile name: an empty one clears it). */
  | 'text'
  /** true or false. */
  | 'boolean'
  /** A safe integer. */
  | 'integer'
  /** A finite number (e.g. seconds, 0.5 too). */
  | 'number'
  /** A message timestamp: a positive safe integer. */
  | 'timestamp';

export interface ParamSpec {
  readonly type: ParamType;
  /** One value or an array (also found under the plural name); resolved to an array. */
  readonly list?: true;
  /** More names signal-cli accepts for it (e.g. updateProfile's `--name` for `--given-name`). */
  readonly aliases?: readonly string[];
  /** Not honoured by the embedded network: given with a value, the call is refused (-32602) with this reason. */
  readonly refused?: string;
}

export type MethodParams = Readonly<Record<string, ParamSpec>>;

const one = (type: ParamType, more: Omit<ParamSpec, 'type' | 'list'> = {}): ParamSpec => ({ type, ...more });
const many = (type: ParamType, more: Omit<ParamSpec, 'type' | 'list'> = {}): ParamSpec => ({
  type,
  list: true,
  ...more,
});
const refused = (spec: ParamSpec, why = 'not supported by the embedded network'): ParamSpec => ({
  ...spec,
  refused: why,
});

const NO_USERNAMES = 'usernames do not exist on the embedded network: use phone numbers';
const NO_STORIES = 'replies and reactions to stories are not supported by the embedded network';

/** Whom a message (or what is said of one) goes to. */
const TO = { recipient: many('string'), groupId: many('string') } as const;
const TO_NUMBERS = { ...TO, username: refused(many('string'), NO_USERNAMES) } as const;
/** Whom a 0.14 message goes to (polls, pins): also this account. `notifySelf` is accepted; the sync copy goes to this account either way. */
const TO_ANY = { ...TO_NUMBERS, noteToSelf: one('boolean'), notifySelf: one('boolean') } as const;
/** The message an interaction points at. */
const TARGET = { targetAuthor: one('string'), targetTimestamp: one('timestamp') } as const;
const NO_STORY_TARGET = { story: refused(one('boolean'), NO_STORIES) } as const;
const CALL = { callId: one('integer') } as const;
const NO_SERVER = { captcha: one('string'), voice: one('boolean') } as const;

export const METHOD_PARAMS: Readonly<Record<string, MethodParams>> = {
  version: {},
  subscribeReceive: { consumer: one('string') },
  unsubscribeReceive: { subscription: one('integer') },
  // JSON-RPC's own (ReceiveParams) and the command line's flags; see poll.ts.
  receive: {
    timeout: one('number'),
    maxMessages: one('integer'),
    consumer: one('string'),
    ignoreAttachments: one('boolean'),
    ignoreStories: one('boolean'),
    ignoreAvatars: one('boolean'),
    ignoreStickers: one('boolean'),
    sendReadReceipts: refused(one('boolean'), 'read receipts are sent with sendReceipt'),
  },
  subscribeCallEvents: {},
  unsubscribeCallEvents: { subscription: one('integer') },

  send: {
    recipient: many('string'),
    groupId: many('string'),
    username: refused(many('string'), NO_USERNAMES),
    noteToSelf: one('boolean'),
    message: one('string'),
    messageFromStdin: refused(one('boolean'), 'a daemon has no standard input: give message'),
    attachment: many('string'),
    viewOnce: one('boolean'),
    sticker: one('string'),
    mention: many('string'),
    textStyle: many('string'),
    quoteTimestamp: one('timestamp'),
    quoteAuthor: one('string'),
    quoteMessage: one('string'),
    quoteMention: many('string'),
    quoteTextStyle: many('string'),
    quoteAttachment: refused(many('string')),
    previewUrl: one('string'),
    previewTitle: one('string'),
    previewDescription: one('string'),
    previewImage: refused(one('string')),
    storyTimestamp: refused(one('timestamp'), NO_STORIES),
    storyAuthor: refused(one('string'), NO_STORIES),
    endSession: refused(one('boolean'), 'the embedded network has no sessions to end'),
    editTimestamp: one('timestamp'),
  },
  sendReceipt: {
    recipient: many('string'),
    targetTimestamp: many('timestamp'),
    type: one('string'),
  },
  sendTyping: { ...TO, stop: one('boolean') },
  sendReaction: {
    ...TO_NUMBERS,
    emoji: one('string'),
    targetAuthor: one('string'),
    targetTimestamp: one('timestamp'),
    remove: one('boolean'),
    story: refused(one('boolean'), NO_STORIES),
  },
  remoteDelete: { ...TO_NUMBERS, targetTimestamp: one('timestamp') },
  sendMessageRequestResponse: { ...TO_NUMBERS, type: one('string') },
  getAttachment: { id: one('string'), recipient: one('string'), groupId: one('string') },
  getUserStatus: {
    recipient: many('string'),
    username: refused(many('string'), NO_USERNAMES),
  },
  listContacts: {
    recipient: many('string'),
    allRecipients: one('boolean'),
    blocked: one('boolean'),
    name: one('string'),
    // JSON output is always detailed, as with signal-cli.
    detailed: one('boolean'),
    internal: refused(one('boolean')),
  },
  // This account's own names for a contact: an empty one clears it.
  updateContact: {
    recipient: one('string'),
    givenName: one('text', { aliases: ['name'] }),
    familyName: one('text'),
    nickGivenName: one('text'),
    nickFamilyName: one('text'),
    note: one('text'),
    expiration: one('integer'),
  },
  block: { ...TO },
  unblock: { ...TO },
  listIdentities: { number: one('string') },
  trust: { recipient: one('string'), trustAllKnownKeys: one('boolean'), verifiedSafetyNumber: one('string') },
  // The profile: a value left out is kept, an empty one clears it.
  updateProfile: {
    givenName: one('text', { aliases: ['name'] }),
    familyName: one('text'),
    about: one('text'),
    aboutEmoji: one('text'),
    avatar: one('string'),
    removeAvatar: one('boolean'),
    mobileCoinAddress: refused(
      one('string', { aliases: ['mobilecoinAddress'] }),
      'the embedded network has no payments',
    ),
  },
  updateGroup: {
    groupId: one('string'),
    name: one('string'),
    description: one('string'),
    avatar: one('string'),
    member: many('string'),
    removeMember: many('string'),
    admin: many('string'),
    removeAdmin: many('string'),
    ban: refused(many('string')),
    unban: refused(many('string')),
    resetLink: one('boolean'),
    link: one('string'),
    setPermissionAddMember: one('string'),
    setPermissionEditDetails: one('string'),
    setPermissionSendMessages: one('string'),
    expiration: one('integer'),
  },
  joinGroup: { uri: one('string') },
  quitGroup: { groupId: one('string'), delete: one('boolean') },
  listGroups: {
    // JSON output is always detailed, as with signal-cli.
    detailed: one('boolean'),
    groupId: many('string'),
  },
  sendSyncRequest: {},
  startLink: {},
  finishLink: { deviceLinkUri: one('string'), deviceName: one('string') },
  addDevice: { uri: one('string') },
  listDevices: {},
  listAccounts: {},
  updateDevice: { deviceId: one('integer'), deviceName: one('string') },
  removeDevice: { deviceId: one('integer') },

  // signal-cli 0.13.23–0.14.x
  sendPollCreate: { ...TO_ANY, question: one('string'), noMulti: one('boolean'), option: many('string') },
  sendPollVote: {
    ...TO_ANY,
    pollAuthor: one('string'),
    pollTimestamp: one('timestamp'),
    option: many('integer'),
    voteCount: one('integer'),
  },
  sendPollTerminate: { ...TO_ANY, pollTimestamp: one('timestamp') },
  sendPinMessage: { ...TO_ANY, ...TARGET, pinDuration: one('integer'), ...NO_STORY_TARGET },
  sendUnpinMessage: { ...TO_ANY, ...TARGET, ...NO_STORY_TARGET },
  sendAdminDelete: { groupId: many('string'), notifySelf: one('boolean'), ...TARGET, ...NO_STORY_TARGET },
  sendStory: { attachment: one('string'), noReplies: one('boolean'), groupId: one('string') },
  terminateGroup: { groupId: one('string') },
  sendPaymentNotification: { recipient: one('string'), receipt: one('string'), note: one('text') },
  sendContacts: {},
  removeContact: { recipient: one('string'), hide: one('boolean'), forget: one('boolean') },

  listStickerPacks: {},
  addStickerPack: { uri: many('string') },
  uploadStickerPack: { path: one('string') },
  getSticker: { packId: one('string'), stickerId: one('integer') },
  getAvatar: { contact: one('string'), profile: one('string'), groupId: one('string') },

  setPin: { pin: one('string') },
  removePin: {},
  submitRateLimitChallenge: { challenge: one('string'), captcha: one('string') },
  updateAccount: {
    deviceName: one('string'),
    unrestrictedUnidentifiedSender: one('boolean'),
    discoverableByNumber: one('boolean'),
    numberSharing: one('boolean'),
    username: refused(one('string'), NO_USERNAMES),
    deleteUsername: one('boolean'),
  },
  updateConfiguration: {
    readReceipts: one('boolean'),
    unidentifiedDeliveryIndicators: one('boolean'),
    typingIndicators: one('boolean'),
    linkPreviews: one('boolean'),
  },
  register: { ...NO_SERVER, reregister: one('boolean') },
  verify: { verificationCode: one('string'), pin: one('string') },
  unregister: { deleteAccount: one('boolean') },
  deleteLocalAccountData: { ignoreRegistered: one('boolean') },
  startChangeNumber: { number: one('string'), ...NO_SERVER },
  finishChangeNumber: { number: one('string'), verificationCode: one('string'), pin: one('string') },

  startCall: { recipient: many('string') },
  acceptCall: CALL,
  hangupCall: CALL,
  rejectCall: CALL,
  listCalls: {},
};

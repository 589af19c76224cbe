/**
 * The documented parameters of each method of the embedded network, as signal-cli 0.13.19's man
 * pages give them (`man1/signal-cli.1`, `man5/signal-cli-jsonrpc.5`): the resolver (params.ts)
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
  /** true or false. */
  | 'boolean'
  /** A safe integer. */
  | 'integer'
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

export const METHOD_PARAMS: Readonly<Record<string, MethodParams>> = {
  version: {},
  subscribeReceive: {},
  unsubscribeReceive: { subscription: one('integer') },

  send: {
    recipient: many('string'),
    groupId: many('string'),
    username: refused(many('string'), NO_USERNAMES),
    noteToSelf: one('boolean'),
    message: one('string'),
    messageFromStdin: refused(one('boolean'), 'a daemon has no standard input: give message'),
    attachment: many('string'),
    viewOnce: refused(one('boolean')),
    sticker: refused(one('string')),
    mention: refused(many('string')),
    textStyle: refused(many('string')),
    quoteTimestamp: refused(one('timestamp')),
    quoteAuthor: refused(one('string')),
    quoteMessage: refused(one('string')),
    quoteMention: refused(many('string')),
    quoteTextStyle: refused(many('string')),
    quoteAttachment: refused(many('string')),
    previewUrl: refused(one('string')),
    previewTitle: refused(one('string')),
    previewDescription: refused(one('string')),
    previewImage: refused(one('string')),
    storyTimestamp: refused(one('timestamp'), 'stories do not exist on the embedded network'),
    storyAuthor: refused(one('string'), 'stories do not exist on the embedded network'),
    endSession: refused(one('boolean'), 'the embedded network has no sessions to end'),
    editTimestamp: refused(one('timestamp')),
  },
  sendReceipt: {
    recipient: many('string'),
    targetTimestamp: many('timestamp'),
    type: one('string'),
  },
  getUserStatus: {
    recipient: many('string'),
    username: refused(many('string'), NO_USERNAMES),
  },
  listContacts: {
    recipient: many('string'),
    allRecipients: one('boolean'),
    blocked: one('boolean'),
    name: refused(one('string')),
    // JSON output is always detailed, as with signal-cli.
    detailed: one('boolean'),
    internal: refused(one('boolean')),
  },
  block: { recipient: many('string'), groupId: many('string') },
  unblock: { recipient: many('string'), groupId: many('string') },
  updateGroup: {
    groupId: one('string'),
    name: one('string'),
    description: one('string'),
    avatar: refused(one('string')),
    member: many('string'),
    removeMember: many('string'),
    admin: many('string'),
    removeAdmin: many('string'),
    ban: refused(many('string')),
    unban: refused(many('string')),
    resetLink: refused(one('boolean')),
    link: refused(one('string')),
    setPermissionAddMember: refused(one('string')),
    setPermissionEditDetails: refused(one('string')),
    setPermissionSendMessages: refused(one('string')),
    expiration: refused(one('integer')),
  },
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
};

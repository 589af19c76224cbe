/**
 * The messaging daemon's method names (DESIGN.md 2.2), the relay's default refusals
 * (DESIGN.md 3) and the shapes of the specified methods (spec 2.3), as signal-cli 0.13.19 has them.
 */

export const SIGNAL_METHODS = [
  'send',
  'sendReceipt',
  'listGroups',
  'updateGroup',
  'getUserStatus',
  'version',
  'sendSyncRequest',
  'listContacts',
  'block',
  'unblock',
  'startLink',
  'finishLink',
  'subscribeReceive',
  'unsubscribeReceive',
] as const;

export type SignalMethod = (typeof SIGNAL_METHODS)[number];

/**
 * Further signal-cli methods the embedded network answers as signal-cli does (beyond the
 * specified ones above).
 */
export const SIGNAL_LOCALNET_METHODS = [
  'sendTyping',
  'sendReaction',
  'remoteDelete',
  'getAttachment',
  'updateProfile',
  'joinGroup',
  'quitGroup',
  'updateContact',
  'listIdentities',
  'trust',
  'sendMessageRequestResponse',
  'addDevice',
  'listDevices',
  'listAccounts',
  // signal-cli 0.13.23–0.14.x
  'sendPollCreate',
  'sendPollVote',
  'sendPollTerminate',
  'sendPinMessage',
  'sendUnpinMessage',
  'sendAdminDelete',
  'sendStory',
  'terminateGroup',
  'sendPaymentNotification',
  'sendContacts',
  'removeContact',
  'updateDevice',
  'removeDevice',
  'listStickerPacks',
  'addStickerPack',
  'uploadStickerPack',
  'getSticker',
  'getAvatar',
  'setPin',
  'removePin',
  'submitRateLimitChallenge',
  'updateAccount',
  'updateConfiguration',
  'startCall',
  'acceptCall',
  'hangupCall',
  'rejectCall',
  'listCalls',
  'subscribeCallEvents',
  'unsubscribeCallEvents',
] as const;

/** The signal-cli version whose JSON-RPC interface (methods, parameters, results, envelopes) the embedded network offers. */
export const SIGNAL_CLI_INTERFACE = '0.14.6';

export function isSignalMethod(name: string): name is SignalMethod {
  return (SIGNAL_METHODS as readonly string[]).includes(name);
}

/** The server-to-client notification that carries an incoming envelope. */
export const RECEIVE_NOTIFICATION = 'receive';
/** The SSE event name of an incoming message on GET /api/v1/events. */
export const SSE_RECEIVE_EVENT = 'receive';
/** Seconds between SSE keep-alive comments. */
export const SSE_KEEPALIVE_S = 15;

/**
 * Methods the relay refuses from a guest by default: each would let a guest take over or
 * destroy the account (link a device, re-register, change the PIN, delete data).
 */
export const RELAY_REFUSED_METHODS = [
  'startLink',
  'finishLink',
  'addDevice',
  'removeDevice',
  'register',
  'verify',
  'unregister',
  'deleteLocalAccountData',
  'updateAccount',
  'setPin',
  'removePin',
  // signal-cli 0.14: moving the account to another number is a re-registration.
  'startChangeNumber',
  'finishChangeNumber',
] as const;

/** A phone number in E.164 form, e.g. +15550000001. */
export type PhoneNumber = string;

export function isPhoneNumber(text: string): boolean {
  return /^\+[1-9]\d{6,14}$/.test(text);
}

/** params of `send` (signal-cli names). `recipient` may be one string or an array. */
export interface SendParams {
  readonly recipient?: PhoneNumber | readonly PhoneNumber[];
  readonly groupId?: string;
  readonly message?: string;
  readonly attachments?: readonly string[];
  readonly attachment?: string;
  readonly quoteTimestamp?: number;
  readonly noteToSelf?: boolean;
}

export interface RecipientAddress {
  readonly uuid: string | null;
  readonly number: PhoneNumber | null;
}

export type SendResultType =
  | 'SUCCESS'
  | 'UNREGISTERED_FAILURE'
  | 'IDENTITY_FAILURE'
  | 'NETWORK_FAILURE'
  | 'RATE_LIMIT_FAILURE'
  | 'PROOF_REQUIRED_FAILURE';

export interface SendResultEntry {
  readonly recipientAddress: RecipientAddress;
  readonly type: SendResultType;
}

export interface SendResult {
  readonly timestamp: number;
  readonly results: readonly SendResultEntry[];
}

export interface GetUserStatusParams {
  readonly recipient: PhoneNumber | readonly PhoneNumber[];
}

export interface UserStatus {
  readonly recipient: string;
  readonly number: PhoneNumber | null;
  readonly uuid: string | null;
  readonly isRegistered: boolean;
}

export interface VersionResult {
  readonly version: string;
}

/** An identity key and its trust, as signal-cli's listIdentities gives it. */
export interface IdentityEntry {
  readonly number: PhoneNumber;
  readonly uuid: string;
  readonly fingerprint: string;
  readonly safetyNumber: string;
  readonly scannableSafetyNumber: string;
  readonly trustLevel: 'TRUSTED_UNVERIFIED' | 'TRUSTED_VERIFIED' | 'UNTRUSTED';
  readonly addedTimestamp: number;
}

export interface GroupInfo {
  readonly id: string;
  readonly name: string;
  readonly description: string | null;
  readonly isMember: boolean;
  readonly isBlocked: boolean;
  readonly members: readonly RecipientAddress[];
  readonly admins: readonly RecipientAddress[];
}

/** The data message inside an incoming envelope. */
export interface DataMessage {
  readonly timestamp: number;
  readonly message: string | null;
  readonly expiresInSeconds: number;
  readonly viewOnce: boolean;
  readonly groupInfo?: { readonly groupId: string; readonly type: string };
  readonly attachments?: readonly unknown[];
  readonly reaction?: Reaction;
  readonly quote?: Quote;
  readonly mentions?: readonly Mention[];
  readonly previews?: readonly Preview[];
  readonly remoteDelete?: { readonly timestamp: number };
  readonly textStyles?: readonly TextStyle[];
  /** A sticker of a pack (`packId` in hex). */
  readonly sticker?: { readonly packId: string; readonly stickerId: number };
  /** signal-cli 0.14: a payment notification (`receipt` in base64). */
  readonly payment?: { readonly note: string | null; readonly receipt: string };
  readonly pollCreate?: {
    readonly question: string;
    readonly allowMultiple: boolean;
    readonly options: readonly string[];
  };
  readonly pollVote?: TargetMessage & {
    readonly author: string | null;
    readonly authorNumber: PhoneNumber | null;
    readonly authorUuid: string | null;
    readonly optionIndexes: readonly number[];
    readonly voteCount: number;
  };
  readonly pollTerminate?: { readonly targetSentTimestamp: number };
  readonly pinMessage?: TargetAuthor & TargetMessage & { readonly pinDurationSeconds: number };
  readonly unpinMessage?: TargetAuthor & TargetMessage;
  readonly adminDelete?: TargetAuthor & TargetMessage;
}

/** The message an interaction points at (its author's sent timestamp). */
interface TargetMessage {
  readonly targetSentTimestamp: number;
}

/** The author of the message an interaction points at, as signal-cli names it (`targetAuthor` is the legacy field). */
interface TargetAuthor {
  readonly targetAuthor: string | null;
  readonly targetAuthorNumber: PhoneNumber | null;
  readonly targetAuthorUuid: string | null;
}

/** A story (signal-cli 0.14's `storyMessage` of an envelope). */
export interface StoryMessage {
  readonly allowsReplies: boolean;
  readonly groupId?: string;
  readonly fileAttachment?: unknown;
}

/** A range of a message's text (UTF-16 code units) in one style, as signal-cli emits it. */
export interface TextStyle {
  readonly style: 'BOLD' | 'ITALIC' | 'SPOILER' | 'STRIKETHROUGH' | 'MONOSPACE';
  readonly start: number;
  readonly length: number;
}

export interface Mention {
  readonly name: string | null;
  readonly number: PhoneNumber | null;
  readonly uuid: string | null;
  readonly start: number;
  readonly length: number;
}

export interface Quote {
  readonly id: number;
  readonly author: string;
  readonly authorNumber: PhoneNumber | null;
  readonly authorUuid: string | null;
  readonly text: string | null;
  readonly mentions?: readonly Mention[];
  readonly attachments: readonly unknown[];
  readonly textStyles?: readonly TextStyle[];
}

export interface Reaction {
  readonly emoji: string;
  readonly targetAuthor: string;
  readonly targetAuthorNumber: PhoneNumber | null;
  readonly targetAuthorUuid: string | null;
  readonly targetSentTimestamp: number;
  readonly isRemove: boolean;
}

export interface Preview {
  readonly url: string;
  readonly title: string;
  readonly description?: string;
}

/** An attachment as envelopes list it (`getAttachment` fetches its bytes by `id`). */
export interface AttachmentInfo {
  readonly contentType: string;
  readonly filename: string | null;
  readonly id: string;
  readonly size: number;
}

export interface TypingMessage {
  readonly action: 'STARTED' | 'STOPPED';
  readonly timestamp: number;
  readonly groupId?: string;
}

export interface EditMessage {
  readonly targetSentTimestamp: number;
  readonly dataMessage: DataMessage;
}

/** What this account itself sent (note to self, another device of the account). */
export interface SentMessage extends DataMessage {
  readonly destination: string | null;
  readonly destinationNumber: PhoneNumber | null;
  readonly destinationUuid: string | null;
}

export interface SyncMessage {
  readonly sentMessage?: SentMessage;
}

export interface ReceiptMessage {
  readonly when: number;
  readonly isDelivery: boolean;
  readonly isRead: boolean;
  readonly isViewed: boolean;
  readonly timestamps: readonly number[];
}

/** An incoming envelope, as signal-cli's `receive` notification carries it. */
export interface Envelope {
  readonly source: string | null;
  readonly sourceNumber: PhoneNumber | null;
  readonly sourceUuid: string | null;
  readonly sourceName: string | null;
  readonly sourceDevice: number;
  readonly timestamp: number;
  readonly serverReceivedTimestamp?: number;
  readonly serverDeliveredTimestamp?: number;
  readonly dataMessage?: DataMessage;
  readonly receiptMessage?: ReceiptMessage;
  readonly syncMessage?: SyncMessage;
  readonly typingMessage?: TypingMessage;
  readonly editMessage?: EditMessage;
  readonly storyMessage?: StoryMessage;
}

/** params of the `receive` notification and the data of an SSE `receive` event. */
export interface ReceiveParams {
  readonly envelope: Envelope;
  readonly account: PhoneNumber;
}

/**
 * The JSON status of GET /api/v1/check with `Accept: application/json` (DESIGN.md 2.2). Times
 * are Unix milliseconds, null when it has not happened yet.
 */
/** One consumer of a daemon's incoming messages (an SSE stream name, `tcp`, `relay`, ...). */
export interface ConsumerStatus {
  readonly name: string;
  /** At least one connection of it is open. */
  readonly connected: boolean;
  readonly connections: number;
  /** Messages that arrived since its last read, waiting for it. */
  readonly held: number;
  /** Age of the oldest of them in seconds; null when none is held. */
  readonly oldestHeldAgeS: number | null;
  /** When it was last connected (ms since the epoch); null: never. */
  readonly lastSeenAt: number | null;
}

export interface DaemonStatus {
  readonly version: string;
  /**
   * The signal-cli version whose JSON-RPC interface the daemon offers: the embedded network's
   * (SIGNAL_CLI_INTERFACE), or the version the signal-cli backend reported (null until it has).
   */
  readonly signalCliInterface: string | null;
  readonly account: PhoneNumber;
  readonly backend: { readonly kind: 'local' | 'signal-cli'; readonly state: 'serving' | 'starting' | 'down' };
  readonly uptimeS: number;
  /** Open SSE streams and TCP connections; and each consumer with its own mark (held messages). */
  readonly consumers: { readonly sse: number; readonly tcp: number; readonly list: readonly ConsumerStatus[] };
  readonly lastOutboundSendAt: number | null;
  readonly lastInboundMessageAt: number | null;
  /**
   * Successful outbound sends and incoming messages stored, since the daemon started: the
   * counters of its metrics listener, here too so that a reader of this status (the status page)
   * has messages per minute without one.
   */
  readonly messages: { readonly sent: number; readonly received: number };
}

/** The structured log record (`msg` value) of every successful outbound send. */
export const SEND_SUCCEEDED_LOG = 'send succeeded';

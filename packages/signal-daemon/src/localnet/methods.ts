/**
 * How the local network's methods are written: each subject (messages, groups, contacts, linking,
 * the account) is a module exporting a table of methods by signal-cli's names; the backend joins
 * the tables and dispatches. A new method goes in its subject's table; a new subject is one more
 * module and one more entry in the backend's list.
 */
import type { Envelope, SendResultEntry } from '@vigil/shared-types';
import type { AttachmentPolicy } from '../attachments.js';
import type { Params } from '../params.js';
import type { Extras } from './extras.js';
import type { Records } from './records.js';
import type { AccountRow, NetworkStore } from './store.js';

/** What an envelope from this account may carry besides its head. */
export type EnvelopeBody = Pick<
  Envelope,
  'dataMessage' | 'receiptMessage' | 'typingMessage' | 'editMessage' | 'syncMessage' | 'storyMessage'
>;

export interface PostOptions {
  /** Index the message as sent (what reactions, remote deletes and edits may point at). */
  readonly record?: { readonly groupId: string | null };
  /** More writes that commit in the same transaction as the delivery. */
  readonly alsoInTransaction?: () => void;
}

/** What a method works with: the network file, this account, sending, and waiting for a change. */
export interface LocalContext {
  readonly store: NetworkStore;
  /** Profiles, contact details, identities, sent messages, group settings (records.ts). */
  readonly records: Records;
  /** Sticker packs, group avatars, account settings (extras.ts). */
  readonly extras: Extras;
  /** This daemon's data directory (received attachments live in `attachments/`). */
  readonly dataDir: string;
  /** This account's public identity key. */
  readonly identityKey: string;
  /** The account this daemon serves. */
  readonly me: AccountRow;
  /** Bounded wait of finishLink for a primary; a link URI older than twice this has expired. */
  readonly linkTimeoutMs: number;
  /** What a file path given as an attachment may name. */
  readonly attachmentPolicy: AttachmentPolicy;
  /** True once the daemon is shutting down. */
  closed(): boolean;
  /** Message timestamps are message ids: strictly increasing per account. */
  nextTimestamp(): number;
  /** An envelope from this account. */
  envelope(timestamp: number, body: EnvelopeBody): Envelope;
  /** The name others see for an account: its profile's, else the one it registered with. */
  displayName(number: string): string | null;
  /**
   * Posts one envelope to each recipient, in one transaction; per-recipient results as signal-cli
   * gives them (UNREGISTERED_FAILURE, IDENTITY_FAILURE for a changed identity not yet trusted).
   */
  post(recipients: readonly string[], envelope: Envelope, options?: PostOptions): Promise<SendResultEntry[]>;
  /** Resolves when the network file changed, when the daemon closes, or after `ms`. */
  waitForChange(ms: number): Promise<void>;
  /**
   * A read a send makes before its transaction, answered once per turn of the event loop while
   * this connection writes nothing (turn-reads.ts): `key` names what `read` reads.
   */
  sendRead<T>(key: string, read: () => T): T;
}

/** One method: its params (an object), its result; it throws RpcFailure for what the client must see. */
export type LocalMethod = (ctx: LocalContext, p: Params) => unknown;

/** The methods of one subject, by name. */
export type LocalMethods = Readonly<Record<string, LocalMethod>>;

/** Joins the subjects' tables; a name in two of them is a programming error. */
export function methodTable(...subjects: LocalMethods[]): ReadonlyMap<string, LocalMethod> {
  const table = new Map<string, LocalMethod>();
  for (const subject of subjects) {
    for (const [name, method] of Object.entries(subject)) {
      if (table.has(name)) throw new Error(`local network method ${name} is defined twice`);
      table.set(name, method);
    }
  }
  return table;
}

/**
 * How the local network's methods are written: each subject (messages, groups, contacts, linking,
 * the account) is a module exporting a table of methods by signal-cli's names; the backend joins
 * the tables and dispatches. A new method goes in its subject's table; a new subject is one more
 * module and one more entry in the backend's list.
 */
import type { Envelope, SendResultEntry } from '@vigil/shared-types';
import type { AttachmentPolicy } from '../attachments.js';
import type { Params } from '../params.js';
import type { AccountRow, NetworkStore } from './store.js';

/** What a method works with: the network file, this account, sending, and waiting for a change. */
export interface LocalContext {
  readonly store: NetworkStore;
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
  envelope(timestamp: number, body: Pick<Envelope, 'dataMessage' | 'receiptMessage'>): Envelope;
  /** Posts one envelope to each recipient; per-recipient results as signal-cli gives them. */
  post(recipients: readonly string[], envelope: Envelope): Promise<SendResultEntry[]>;
  /** Resolves when the network file changed, when the daemon closes, or after `ms`. */
  waitForChange(ms: number): Promise<void>;
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

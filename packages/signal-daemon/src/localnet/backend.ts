import { type FSWatcher, watch } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  type Envelope,
  type Logger,
  RpcErrorCode,
  type SendResultEntry,
  SIGNAL_CLI_INTERFACE,
} from '@vigil/shared-types';
import { ensureDir, PRIVATE_DIR, writeFileAtomic } from '@vigil/shared-types/node';
import type { AttachmentPolicy } from '../attachments.js';
import type { Backend, BackendState } from '../backend.js';
import { RpcFailure } from '../errors.js';
import type { Inbox } from '../inbox.js';
import { resolveParams } from '../params.js';
import { accountMethods } from './account.js';
import { attachmentMethods } from './attachments.js';
import { avatarMethods } from './avatars.js';
import { callMethods } from './calls.js';
import { contactMethods } from './contacts.js';
import { deviceMethods } from './devices.js';
import { Extras } from './extras.js';
import { FaultEpisode, isStorageFault, RETRY_INITIAL_MS, RETRY_MAX_MS } from './fault.js';
import { groupMethods } from './groups.js';
import { identityMethods } from './identities.js';
import { loadIdentity, untrusted } from './identity.js';
import { interactionMethods } from './interactions.js';
import { linkingMethods } from './linking.js';
import { messageMethods } from './messages.js';
import { type EnvelopeBody, type LocalContext, methodTable, type PostOptions } from './methods.js';
import { pinMethods } from './pins.js';
import { pollMethods } from './polls.js';
import { Records } from './records.js';
import { settingMethods } from './settings.js';
import { stickerMethods } from './stickers.js';
import { type AccountRow, NetworkStore } from './store.js';
import { storyMethods } from './stories.js';

export interface LocalBackendOptions {
  readonly account: string;
  readonly profileName: string;
  readonly localnet: string;
  readonly dataDir: string;
  readonly linkTimeoutMs: number;
  readonly attachmentPolicy: AttachmentPolicy;
  readonly logger: Logger;
  /** Where incoming envelopes are stored (it shares the network's database: see `inboxDb`). */
  readonly inbox: (db: NetworkStore['db']) => Inbox;
}

const POLL_MS = 250;
/** Methods whose success proves that the file can be written. */
const WRITES = new Set([
  'send',
  'sendReceipt',
  'sendTyping',
  'sendReaction',
  'remoteDelete',
  'sendMessageRequestResponse',
  'updateGroup',
  'joinGroup',
  'quitGroup',
  'updateContact',
  'updateProfile',
  'trust',
  'block',
  'unblock',
  'updateDevice',
  'removeDevice',
  'sendPollCreate',
  'sendPollVote',
  'sendPollTerminate',
  'sendPinMessage',
  'sendUnpinMessage',
  'sendAdminDelete',
  'sendStory',
  'terminateGroup',
  'sendPaymentNotification',
  'removeContact',
  'addStickerPack',
  'uploadStickerPack',
  'setPin',
  'removePin',
  'updateAccount',
  'updateConfiguration',
]);
const DELIVERY_BATCH = 512;

/** Every method of the local network, from its subject's module (see methods.ts). */
const METHODS = methodTable(
  messageMethods,
  interactionMethods,
  attachmentMethods,
  groupMethods,
  contactMethods,
  identityMethods,
  linkingMethods,
  accountMethods,
  pollMethods,
  pinMethods,
  storyMethods,
  stickerMethods,
  avatarMethods,
  deviceMethods,
  settingMethods,
  callMethods,
);
/** The names of the methods the local network answers (each has its params in methods-params.ts). */
export const LOCAL_METHODS: readonly string[] = [...METHODS.keys()];

/** The attachments an envelope carries: a message's, a story's. */
function attachmentsOf(e: Envelope): { id: string }[] {
  const story = e.storyMessage?.fileAttachment as { id: string } | undefined;
  return [...((e.dataMessage?.attachments ?? []) as { id: string }[]), ...(story ? [story] : [])];
}

/** The name shown for an account: its profile's given and family name, else the registered one. */
function displayName(records: Records, account: AccountRow | undefined, number: string): string | null {
  const p = records.profile(number);
  const name = [p?.givenName, p?.familyName].filter(Boolean).join(' ');
  return name || account?.profileName || null;
}

/**
 * The embedded local network: every daemon of the user registers its account in one SQLite
 * file; a send posts to the recipients' mailboxes; each daemon picks up its own mail as soon as
 * the file changes (a directory watch, with a poll of SQLite's data_version as a safety net),
 * storing it in its inbox and removing it from the mailbox in one transaction. The methods are
 * written by subject (messages.ts, groups.ts, contacts.ts, linking.ts, account.ts) against the
 * small context this class gives them.
 */
export class LocalBackend implements Backend {
  readonly kind = 'local' as const;
  readonly inbox: Inbox;

  private readonly store: NetworkStore;
  private readonly records: Records;
  private readonly extras: Extras;
  private readonly me: AccountRow;
  private readonly context: LocalContext;
  private lastTimestamp = 0;
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private deliveryScheduled = false;
  private lastDataVersion = -1;
  private closed = false;
  private readonly waits = new Set<() => void>();
  /** A full disk or an I/O error: one episode, retried with backoff (see fault.ts). */
  readonly storage: FaultEpisode;
  /** Another delivery failure: retried with backoff, logged once per episode. */
  private deliveryFault: { since: number; failures: number; delayMs: number; timer: NodeJS.Timeout | null } | null =
    null;

  constructor(private readonly o: LocalBackendOptions) {
    this.store = new NetworkStore(o.localnet);
    this.me = this.store.register(o.account, o.profileName);
    this.records = new Records(this.store.db);
    this.extras = new Extras(this.store.db);
    ensureDir(o.dataDir);
    const identityKey = loadIdentity(o.dataDir);
    if (this.records.publishIdentity(this.me.number, identityKey)) {
      o.logger.warn('this account has a new identity key: its contacts must trust it again', {
        account: this.me.number,
      });
    }
    this.storage = new FaultEpisode(
      o.logger,
      () => this.store.probeWrite(this.me.number),
      () => {
        this.lastDataVersion = -1;
        this.scheduleDelivery();
      },
    );
    this.inbox = o.inbox(this.store.db);
    this.context = {
      store: this.store,
      records: this.records,
      extras: this.extras,
      dataDir: o.dataDir,
      identityKey,
      displayName: (number) => displayName(this.records, this.store.account(number), number),
      me: this.me,
      linkTimeoutMs: o.linkTimeoutMs,
      attachmentPolicy: o.attachmentPolicy,
      closed: () => this.closed,
      nextTimestamp: () => this.nextTimestamp(),
      envelope: (timestamp, body) => this.envelope(timestamp, body),
      post: (recipients, envelope, options) => this.post(recipients, envelope, options),
      waitForChange: (ms) => this.waitForChange(ms),
    };
    ensureDir(join(o.dataDir, 'attachments'), PRIVATE_DIR, true);
    this.deliver();
    try {
      this.watcher = watch(dirname(o.localnet), { persistent: false }, () => this.scheduleDelivery());
      this.watcher.on('error', (err) => {
        o.logger.warn('local network watch failed; polling only', { error: String(err) });
        this.watcher?.close();
        this.watcher = null;
      });
    } catch (err) {
      o.logger.warn('cannot watch the local network directory; polling only', { error: String(err) });
    }
    this.poll = setInterval(() => this.scheduleDelivery(), POLL_MS);
    this.poll.unref();
  }

  handles(method: string): boolean {
    return METHODS.has(method);
  }

  signalCliInterface(): string {
    return SIGNAL_CLI_INTERFACE;
  }

  state(): BackendState {
    return this.closed ? 'down' : 'serving';
  }

  fault(): string | null {
    return this.storage.active ? `the local network's storage is failing: ${this.storage.reason}` : null;
  }

  async call(method: string, raw: unknown): Promise<unknown> {
    const fn = METHODS.get(method);
    if (!fn) throw new RpcFailure(RpcErrorCode.METHOD_NOT_FOUND, 'Method not implemented');
    try {
      // Every parameter resolved once, as signal-cli resolves them, before the method sees it.
      const result = await fn(this.context, resolveParams(method, raw));
      if (WRITES.has(method)) this.storage.ok();
      return result;
    } catch (err) {
      if (!isStorageFault(err)) throw err;
      this.storage.fail(err, method);
      throw new RpcFailure(
        RpcErrorCode.IO_ERROR,
        `I/O error: the local network's storage is failing (${(err as Error).message}); nothing was sent`,
      );
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
    this.storage.stop();
    if (this.deliveryFault?.timer) clearTimeout(this.deliveryFault.timer);
    for (const wake of this.waits) wake();
    await this.store.close();
  }

  // ---- delivery -------------------------------------------------------------------------

  private scheduleDelivery(): void {
    // While a fault lasts, its backoff (not every change of the file) decides when to try again.
    if (this.deliveryScheduled || this.closed || this.storage.active || this.deliveryFault?.timer) return;
    this.deliveryScheduled = true;
    setImmediate(() => {
      this.deliveryScheduled = false;
      if (this.closed) return;
      try {
        const v = this.store.dataVersion();
        if (v === this.lastDataVersion) return;
        this.lastDataVersion = v;
        this.deliverNow();
      } catch {
        // deliverNow handles its failures; dataVersion failing is retried at the next poll
        this.lastDataVersion = -1;
      }
    });
  }

  /** Delivers, and handles a failure: one log line per episode, retries with backoff. */
  private deliverNow(): void {
    try {
      if (this.deliver() > 0) this.storage.ok();
      if (this.deliveryFault) {
        this.o.logger.info('delivery from the local network works again', {
          failedAttempts: this.deliveryFault.failures,
          forS: Math.round((Date.now() - this.deliveryFault.since) / 1000),
        });
        this.deliveryFault = null;
      }
      for (const wake of this.waits) wake();
    } catch (err) {
      this.lastDataVersion = -1;
      if (isStorageFault(err)) {
        this.storage.fail(err, 'delivery from the local network');
        return;
      }
      this.deliveryFault ??= { since: Date.now(), failures: 0, delayMs: RETRY_INITIAL_MS, timer: null };
      const f = this.deliveryFault;
      f.failures++;
      if (f.failures === 1) {
        this.o.logger.error('delivery from the local network failed; retrying with backoff', { error: String(err) });
      }
      const delay = f.delayMs;
      f.delayMs = Math.min(f.delayMs * 2, RETRY_MAX_MS);
      f.timer = setTimeout(() => {
        f.timer = null;
        if (!this.closed) this.deliverNow();
      }, delay);
      f.timer.unref();
    }
  }

  /** Moves this account's mail into the inbox, oldest first, one transaction per batch; how many. */
  private deliver(): number {
    let moved = 0;
    while (!this.closed && this.store.hasMail(this.me.number)) {
      const { envelopes, lastId } = this.store.mail(this.me.number, DELIVERY_BATCH);
      const now = Date.now();
      const accepted = envelopes.filter((e) => this.accepts(e)).map((e) => ({ ...e, serverDeliveredTimestamp: now }));
      for (const e of accepted) this.saveAttachments(e);
      this.inbox.append(accepted, () => {
        this.store.deleteMailUpTo(this.me.number, lastId);
        for (const e of accepted) this.noteSender(e);
      });
      moved += envelopes.length;
      if (accepted.length < envelopes.length) {
        this.o.logger.info('dropped messages from blocked senders', { count: envelopes.length - accepted.length });
      }
    }
    return moved;
  }

  /** A blocked sender's messages, and messages (and stories) to a blocked group, are not delivered. */
  private accepts(e: Envelope): boolean {
    if (e.sourceNumber && this.store.isBlocked(this.me.number, e.sourceNumber)) return false;
    const groupId = e.dataMessage?.groupInfo?.groupId ?? e.storyMessage?.groupId;
    return !(groupId && this.store.isGroupBlocked(this.me.number, groupId));
  }

  /** The sender becomes a contact, its identity key is trusted on first use, its attachments are its. */
  private noteSender(e: Envelope): void {
    const sender = e.sourceNumber;
    if (!sender || sender === this.me.number) return;
    this.store.addContact(this.me.number, sender);
    this.records.trustOnFirstUse(this.me.number, sender);
    const groupId = e.dataMessage?.groupInfo?.groupId ?? e.storyMessage?.groupId ?? null;
    for (const a of attachmentsOf(e)) {
      this.records.receivedAttachment(this.me.number, a.id, sender, groupId);
    }
  }

  /** Received attachments are files in the data directory, written before the message is acknowledged. */
  private saveAttachments(e: Envelope): void {
    for (const a of attachmentsOf(e)) {
      const row = this.store.attachment(a.id);
      if (row) writeFileAtomic(join(this.o.dataDir, 'attachments', a.id), row.data);
    }
  }

  /** Resolves at the next delivery (the file changed), at close, or after `ms`. */
  private waitForChange(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(t);
        this.waits.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.waits.add(wake);
    });
  }

  // ---- sending ------------------------------------------------------------------------------

  private nextTimestamp(): number {
    this.lastTimestamp = Math.max(Date.now(), this.lastTimestamp + 1);
    return this.lastTimestamp;
  }

  private envelope(timestamp: number, body: EnvelopeBody): Envelope {
    return {
      source: this.me.number,
      sourceNumber: this.me.number,
      sourceUuid: this.me.uuid,
      sourceName: displayName(this.records, this.me, this.me.number),
      sourceDevice: 1,
      timestamp,
      serverReceivedTimestamp: Date.now(),
      ...body,
    };
  }

  private async post(
    recipients: readonly string[],
    envelope: Envelope,
    options: PostOptions = {},
  ): Promise<SendResultEntry[]> {
    const results: SendResultEntry[] = [];
    const deliveries: { recipient: string; envelope: Envelope }[] = [];
    const distrusted = untrusted(this.records, this.me.number, recipients);
    for (const number of new Set(recipients)) {
      const account = this.store.account(number);
      if (!account) {
        results.push({ recipientAddress: { uuid: null, number }, type: 'UNREGISTERED_FAILURE' });
        continue;
      }
      if (distrusted.has(number)) {
        results.push({ recipientAddress: { uuid: account.uuid, number }, type: 'IDENTITY_FAILURE' });
        continue;
      }
      deliveries.push({ recipient: number, envelope });
      results.push({ recipientAddress: { uuid: account.uuid, number }, type: 'SUCCESS' });
    }
    const me = this.me.number;
    await this.store.post(me, deliveries, () => {
      for (const { recipient } of deliveries) {
        if (recipient !== me) this.records.trustOnFirstUse(me, recipient);
      }
      if (options.record && deliveries.length > 0) {
        const parties = deliveries.map((d) => d.recipient);
        this.records.recordSent(me, envelope.timestamp, parties, options.record.groupId);
      }
      if (deliveries.length > 0) options.alsoInTransaction?.();
    });
    if (deliveries.some((d) => d.recipient === this.me.number)) this.scheduleSelfDelivery();
    return results;
  }

  /** Our own connection's commits do not change data_version: deliver note-to-self mail directly. */
  private scheduleSelfDelivery(): void {
    setImmediate(() => {
      if (!this.closed && !this.storage.active) this.deliverNow();
    });
  }
}

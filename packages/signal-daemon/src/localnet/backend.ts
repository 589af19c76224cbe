import { join } from 'node:path';
import {
  type Envelope,
  type Logger,
  RpcErrorCode,
  type SendResultEntry,
  SIGNAL_CLI_INTERFACE,
} from '@vigil/shared-types';
import { ensureDir, PRIVATE_DIR } from '@vigil/shared-types/node';
import type { AttachmentPolicy } from '../attachments.js';
import type { Backend, BackendState } from '../backend.js';
import { RpcFailure } from '../errors.js';
import type { Inbox } from '../inbox.js';
import { resolveParams } from '../params.js';
import { BUSY_TIMEOUT_MS, type Synchronous } from '../sqlite.js';
import { accountMethods } from './account.js';
import { attachmentMethods } from './attachments.js';
import { avatarMethods } from './avatars.js';
import { callMethods } from './calls.js';
import { startCheckpointer } from './checkpoint.js';
import { contactMethods } from './contacts.js';
import { Delivery } from './delivery.js';
import { deviceMethods } from './devices.js';
import { Extras } from './extras.js';
import { FaultEpisode, isStorageFault } from './fault.js';
import { groupMethods } from './groups.js';
import { identityMethods } from './identities.js';
import { loadIdentity } from './identity.js';
import { interactionMethods } from './interactions.js';
import { linkingMethods } from './linking.js';
import { MailPosition } from './mail-position.js';
import { messageMethods } from './messages.js';
import { type EnvelopeBody, type LocalContext, methodTable, type PostOptions } from './methods.js';
import { pinMethods } from './pins.js';
import { pollMethods } from './polls.js';
import { Records } from './records.js';
import { NetworkRetention } from './retention.js';
import { settingMethods } from './settings.js';
import { stickerMethods } from './stickers.js';
import { type AccountRow, NetworkStore } from './store.js';
import { storyMethods } from './stories.js';
import { TurnReads } from './turn-reads.js';

export interface LocalBackendOptions {
  readonly account: string;
  readonly profileName: string;
  readonly localnet: string;
  /** How commits to the network file reach the disk (see sqlite.ts). */
  readonly synchronous: Synchronous;
  readonly dataDir: string;
  readonly linkTimeoutMs: number;
  readonly attachmentPolicy: AttachmentPolicy;
  readonly logger: Logger;
  /** Sent-message records, unclaimed mail and attachments older than this are pruned (see retention.ts). */
  readonly retentionMs: number;
  /**
   * Where incoming envelopes are stored: a file of the daemon's own, which this backend also
   * checkpoints (see mail-position.ts); the daemon closes it after the backend.
   */
  readonly inbox: Inbox;
}

/** Methods whose success proves that the file can be written (in alphabetical order). */
const WRITES = new Set([
  'addStickerPack',
  'block',
  'joinGroup',
  'quitGroup',
  'remoteDelete',
  'removeContact',
  'removeDevice',
  'removePin',
  'send',
  'sendAdminDelete',
  'sendMessageRequestResponse',
  'sendPaymentNotification',
  'sendPinMessage',
  'sendPollCreate',
  'sendPollTerminate',
  'sendPollVote',
  'sendReaction',
  'sendReceipt',
  'sendStory',
  'sendTyping',
  'sendUnpinMessage',
  'setPin',
  'terminateGroup',
  'trust',
  'unblock',
  'updateAccount',
  'updateConfiguration',
  'updateContact',
  'updateDevice',
  'updateGroup',
  'updateProfile',
  'uploadStickerPack',
]);

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

/** The name shown for an account: its profile's given and family name, else the registered one. */
function displayName(records: Records, account: AccountRow | undefined, number: string): string | null {
  const p = records.profile(number);
  const name = [p?.givenName, p?.familyName].filter(Boolean).join(' ');
  return name || account?.profileName || null;
}

/**
 * The embedded local network: every daemon of the user registers its account in one SQLite
 * file; a send posts to the recipients' mailboxes; each daemon picks up its own mail as soon as
 * the file changes (delivery.ts). The methods are
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
  private readonly retention: NetworkRetention;
  private readonly delivery: Delivery;
  private readonly inboxCheckpointer: { stop(): Promise<void> };
  private readonly position: MailPosition;
  /** A send's reads before its transaction, once per turn (turn-reads.ts). */
  private readonly reads: TurnReads;
  private lastTimestamp = 0;
  private closed = false;
  /** A full disk or an I/O error: one episode, retried with backoff (see fault.ts). */
  readonly storage: FaultEpisode;

  constructor(o: LocalBackendOptions) {
    this.store = new NetworkStore(o.localnet, o.synchronous);
    this.me = this.store.register(o.account, o.profileName);
    this.records = new Records(this.store.db);
    this.extras = new Extras(this.store.db);
    this.reads = new TurnReads(this.store.db);
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
      () => this.delivery.retry(),
    );
    this.inbox = o.inbox;
    const position = new MailPosition(this.inbox.db, this.store, this.me.number, o.logger);
    this.position = position;
    // As the network file's: checkpointed once a second off the event loop; once a checkpoint has
    // found the inbox on disk, the mail it holds is removed from the mailbox.
    this.inbox.db.pragma('wal_autocheckpoint = 0');
    this.inboxCheckpointer = startCheckpointer(this.inbox.db.name, this.inbox.db, BUSY_TIMEOUT_MS, (at) =>
      position.synced(at),
    );
    this.delivery = new Delivery({
      store: this.store,
      records: this.records,
      inbox: this.inbox,
      position,
      me: this.me,
      dataDir: o.dataDir,
      logger: o.logger,
      storage: this.storage,
    });
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
      waitForChange: (ms) => this.delivery.waitForChange(ms),
      sendRead: (key, read) => this.reads.get(key, read),
    };
    ensureDir(join(o.dataDir, 'attachments'), PRIVATE_DIR, true);
    this.delivery.start();
    this.retention = new NetworkRetention(this.store.db, (fn) => this.store.write(fn), o.retentionMs, o.logger, {
      owner: this.me.number,
      dir: join(o.dataDir, 'attachments'),
    });
    this.retention.start();
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
    this.delivery.stop();
    this.storage.stop();
    await this.retention.stop();
    await this.inboxCheckpointer.stop();
    this.position.stop();
    await this.store.close();
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
      sourceName: this.reads.get('name', () => displayName(this.records, this.me, this.me.number)),
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
    const me = this.me.number;
    for (const number of new Set(recipients)) {
      const account = this.reads.get(`account:${number}`, () => this.store.account(number));
      if (!account) {
        results.push({ recipientAddress: { uuid: null, number }, type: 'UNREGISTERED_FAILURE' });
        continue;
      }
      if (number !== me && this.reads.get(`keyChanged:${number}`, () => this.records.keyChanged(me, number))) {
        results.push({ recipientAddress: { uuid: account.uuid, number }, type: 'IDENTITY_FAILURE' });
        continue;
      }
      deliveries.push({ recipient: number, envelope });
      results.push({ recipientAddress: { uuid: account.uuid, number }, type: 'SUCCESS' });
    }
    await this.store.post(me, deliveries, () => {
      for (const { recipient } of deliveries) {
        if (recipient !== me)
          this.store.once(`tofu:${me}:${recipient}`, () => this.records.trustOnFirstUse(me, recipient));
      }
      if (options.record && deliveries.length > 0) {
        const parties = deliveries.map((d) => d.recipient);
        this.records.recordSent(me, envelope.timestamp, parties, options.record.groupId);
      }
      if (deliveries.length > 0) options.alsoInTransaction?.();
    });
    // Our own connection's commits do not change data_version: note-to-self mail is delivered directly.
    if (deliveries.some((d) => d.recipient === this.me.number)) this.delivery.soon();
    return results;
  }
}

import { randomBytes, randomUUID } from 'node:crypto';
import { type FSWatcher, mkdirSync, readFileSync, renameSync, statSync, watch, writeFileSync } from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import {
  type DataMessage,
  type Envelope,
  type GroupInfo,
  type RecipientAddress,
  RpcErrorCode,
  type SendResult,
  type SendResultEntry,
  type UserStatus,
} from '@vigil/shared-types';
import type { Backend, BackendState } from '../backend.js';
import { invalidParams, RpcFailure, userError } from '../errors.js';
import type { Inbox } from '../inbox.js';
import type { Logger } from '../logger.js';
import { asParams, numbers, optBool, optString, type Params, reqString, strings, timestamps } from '../params.js';
import { type AccountRow, type GroupRow, NetworkStore } from './store.js';

export interface LocalBackendOptions {
  readonly account: string;
  readonly profileName: string;
  readonly localnet: string;
  readonly dataDir: string;
  readonly linkTimeoutMs: number;
  readonly maxAttachmentBytes: number;
  readonly logger: Logger;
  /** Where incoming envelopes are stored (it shares the network's database: see `inboxDb`). */
  readonly inbox: (db: NetworkStore['db']) => Inbox;
}

const POLL_MS = 250;
const DELIVERY_BATCH = 512;
const LINK_POLL_MS = 100;

const METHODS = [
  'send',
  'sendReceipt',
  'getUserStatus',
  'listContacts',
  'block',
  'unblock',
  'updateGroup',
  'listGroups',
  'sendSyncRequest',
  'startLink',
  'finishLink',
  'addDevice',
  'listDevices',
  'listAccounts',
] as const;

/**
 * The embedded local network: every daemon of the user registers its account in one SQLite
 * file; a send posts to the recipients' mailboxes; each daemon picks up its own mail as soon as
 * the file changes (a directory watch, with a poll of SQLite's data_version as a safety net),
 * storing it in its inbox and removing it from the mailbox in one transaction.
 */
export class LocalBackend implements Backend {
  readonly kind = 'local' as const;
  readonly inbox: Inbox;

  private readonly store: NetworkStore;
  private readonly me: AccountRow;
  private lastTimestamp = 0;
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private deliveryScheduled = false;
  private lastDataVersion = -1;
  private closed = false;
  private readonly waits = new Set<() => void>();

  constructor(private readonly o: LocalBackendOptions) {
    this.store = new NetworkStore(o.localnet);
    this.me = this.store.register(o.account, o.profileName);
    this.inbox = o.inbox(this.store.db);
    mkdirSync(join(o.dataDir, 'attachments'), { recursive: true, mode: 0o700 });
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
    return (METHODS as readonly string[]).includes(method);
  }

  state(): BackendState {
    return this.closed ? 'down' : 'serving';
  }

  async call(method: string, raw: unknown): Promise<unknown> {
    const p = asParams(raw);
    switch (method as (typeof METHODS)[number]) {
      case 'send':
        return this.send(p);
      case 'sendReceipt':
        return this.sendReceipt(p);
      case 'getUserStatus':
        return this.getUserStatus(p);
      case 'listContacts':
        return this.listContacts(p);
      case 'block':
        return this.setBlocked(p, true);
      case 'unblock':
        return this.setBlocked(p, false);
      case 'updateGroup':
        return this.updateGroup(p);
      case 'listGroups':
        return this.listGroups();
      case 'sendSyncRequest':
        // A local account has no other devices to ask: nothing to synchronise.
        return {};
      case 'startLink':
        return this.startLink();
      case 'finishLink':
        return this.finishLink(p);
      case 'addDevice':
        return this.addDevice(p);
      case 'listDevices':
        return this.listDevices();
      case 'listAccounts':
        return this.store.accounts().map((a) => ({ number: a.number }));
      default:
        throw new RpcFailure(RpcErrorCode.METHOD_NOT_FOUND, 'Method not implemented');
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
    for (const wake of this.waits) wake();
    await this.store.close();
  }

  // ---- delivery -------------------------------------------------------------------------

  private scheduleDelivery(): void {
    if (this.deliveryScheduled || this.closed) return;
    this.deliveryScheduled = true;
    setImmediate(() => {
      this.deliveryScheduled = false;
      if (this.closed) return;
      try {
        const v = this.store.dataVersion();
        if (v === this.lastDataVersion) return;
        this.lastDataVersion = v;
        this.deliver();
        for (const wake of this.waits) wake();
      } catch (err) {
        this.o.logger.error('delivery from the local network failed; will retry', { error: String(err) });
        this.lastDataVersion = -1;
      }
    });
  }

  /** Moves this account's mail into the inbox, oldest first, one transaction per batch. */
  private deliver(): void {
    while (!this.closed && this.store.hasMail(this.me.number)) {
      const { envelopes, lastId } = this.store.mail(this.me.number, DELIVERY_BATCH);
      const now = Date.now();
      const accepted = envelopes.filter((e) => this.accepts(e)).map((e) => ({ ...e, serverDeliveredTimestamp: now }));
      for (const e of accepted) this.saveAttachments(e);
      this.inbox.append(accepted, () => {
        this.store.deleteMailUpTo(this.me.number, lastId);
        for (const e of accepted) if (e.sourceNumber) this.store.addContact(this.me.number, e.sourceNumber);
      });
      if (accepted.length < envelopes.length) {
        this.o.logger.info('dropped messages from blocked senders', { count: envelopes.length - accepted.length });
      }
    }
  }

  /** A blocked sender's messages, and messages to a blocked group, are not delivered. */
  private accepts(e: Envelope): boolean {
    if (e.sourceNumber && this.store.isBlocked(this.me.number, e.sourceNumber)) return false;
    const groupId = e.dataMessage?.groupInfo?.groupId;
    return !(groupId && this.store.isGroupBlocked(this.me.number, groupId));
  }

  private saveAttachments(e: Envelope): void {
    for (const a of (e.dataMessage?.attachments ?? []) as { id: string }[]) {
      const row = this.store.attachment(a.id);
      if (!row) continue;
      const file = join(this.o.dataDir, 'attachments', a.id);
      const tmp = `${file}.tmp-${process.pid}`;
      writeFileSync(tmp, row.data, { mode: 0o600 });
      renameSync(tmp, file);
    }
  }

  // ---- sending ------------------------------------------------------------------------------

  /** Message timestamps are message ids: strictly increasing per account. */
  private nextTimestamp(): number {
    this.lastTimestamp = Math.max(Date.now(), this.lastTimestamp + 1);
    return this.lastTimestamp;
  }

  private envelope(timestamp: number, body: Pick<Envelope, 'dataMessage' | 'receiptMessage'>): Envelope {
    return {
      source: this.me.number,
      sourceNumber: this.me.number,
      sourceUuid: this.me.uuid,
      sourceName: this.me.profileName,
      sourceDevice: 1,
      timestamp,
      serverReceivedTimestamp: Date.now(),
      ...body,
    };
  }

  /** Posts one envelope to each recipient; per-recipient results as signal-cli gives them. */
  private async post(recipients: readonly string[], envelope: Envelope): Promise<SendResultEntry[]> {
    const results: SendResultEntry[] = [];
    const deliveries: { recipient: string; envelope: Envelope }[] = [];
    for (const number of new Set(recipients)) {
      const account = this.store.account(number);
      if (!account) {
        results.push({ recipientAddress: { uuid: null, number }, type: 'UNREGISTERED_FAILURE' });
        continue;
      }
      deliveries.push({ recipient: number, envelope });
      results.push({ recipientAddress: { uuid: account.uuid, number }, type: 'SUCCESS' });
    }
    await this.store.post(this.me.number, deliveries);
    if (deliveries.some((d) => d.recipient === this.me.number)) this.scheduleSelfDelivery();
    return results;
  }

  /** Our own connection's commits do not change data_version: deliver note-to-self mail directly. */
  private scheduleSelfDelivery(): void {
    setImmediate(() => {
      if (!this.closed) this.deliver();
    });
  }

  private finishSend(timestamp: number, results: SendResultEntry[], what: string): SendResult {
    const result: SendResult = { timestamp, results };
    const ok = results.filter((r) => r.type === 'SUCCESS').length;
    if (results.length > 0 && ok === 0) {
      const why = [...new Set(results.map((r) => r.type))].join(', ');
      throw userError(`Failed to send ${what}: ${why}`, { response: result });
    }
    return result;
  }

  private async send(p: Params): Promise<SendResult> {
    const recipients = numbers(p, 'recipient');
    const groupIds = strings(p, 'groupId');
    const noteToSelf = optBool(p, 'noteToSelf');
    if (noteToSelf) recipients.push(this.me.number);
    if (recipients.length === 0 && groupIds.length === 0) {
      throw invalidParams('no recipients given: set recipient, groupId or noteToSelf');
    }
    const message = optString(p, 'message') ?? null;
    const attachments = [...strings(p, 'attachments'), ...strings(p, 'attachment')].map((a) => this.attachment(a));
    if (message === null && attachments.length === 0) throw invalidParams('message or attachments required');
    const timestamp = this.nextTimestamp();
    const dataMessage = (groupInfo?: DataMessage['groupInfo']): DataMessage => ({
      timestamp,
      message,
      expiresInSeconds: 0,
      viewOnce: false,
      ...(attachments.length > 0 ? { attachments } : {}),
      ...(groupInfo ? { groupInfo } : {}),
    });
    const results: SendResultEntry[] = [];
    if (recipients.length > 0) {
      results.push(...(await this.post(recipients, this.envelope(timestamp, { dataMessage: dataMessage() }))));
    }
    for (const groupId of groupIds) {
      const group = this.memberGroup(groupId);
      const members = this.store.members(groupId).filter((m) => m.number !== this.me.number);
      const info = { groupId, groupName: group.name, revision: group.revision, type: 'DELIVER' };
      results.push(
        ...(await this.post(
          members.map((m) => m.number),
          this.envelope(timestamp, { dataMessage: dataMessage(info) }),
        )),
      );
    }
    // A group with no other members is a successful send to nobody.
    return this.finishSend(timestamp, results, 'message');
  }

  /** An attachment given as a data URI (`data:MIME[;filename=NAME];base64,DATA`) or a file path. */
  private attachment(spec: string): Record<string, unknown> {
    let contentType = 'application/octet-stream';
    let filename: string | null = null;
    let data: Buffer;
    const uri = /^data:([^;,]+)?((?:;[^;,=]+=[^;,]*)*)(;base64)?,(.*)$/s.exec(spec);
    if (uri) {
      contentType = uri[1] ?? 'text/plain';
      filename = /;filename=([^;,]*)/.exec(uri[2] ?? '')?.[1] ?? null;
      data = uri[3] ? Buffer.from(uri[4] ?? '', 'base64') : Buffer.from(decodeURIComponent(uri[4] ?? ''));
    } else if (isAbsolute(spec)) {
      let size: number;
      try {
        size = statSync(spec).size;
      } catch {
        throw invalidParams(`attachment ${spec} cannot be read`);
      }
      if (size > this.o.maxAttachmentBytes)
        throw invalidParams(`attachment ${spec} is larger than ${this.o.maxAttachmentBytes} bytes`);
      data = readFileSync(spec);
      filename = basename(spec);
    } else {
      throw invalidParams('attachments must be data URIs (data:MIME;base64,DATA) or absolute file paths');
    }
    const id = `${randomBytes(12).toString('hex')}`;
    this.store.putAttachment({ id, contentType, filename, data });
    return {
      contentType,
      filename,
      id,
      size: data.length,
      width: null,
      height: null,
      caption: null,
      uploadTimestamp: Date.now(),
    };
  }

  private async sendReceipt(p: Params): Promise<SendResult> {
    const recipients = numbers(p, 'recipient');
    if (recipients.length !== 1) throw invalidParams('recipient must be exactly one phone number');
    const targets = [...timestamps(p, 'targetTimestamp'), ...timestamps(p, 'targetTimestamps')];
    if (targets.length === 0) throw invalidParams('targetTimestamp is required');
    const type = optString(p, 'type') ?? 'read';
    if (type !== 'read' && type !== 'viewed') throw invalidParams('type must be read or viewed');
    const timestamp = this.nextTimestamp();
    const receiptMessage = {
      when: timestamp,
      isDelivery: false,
      isRead: type === 'read',
      isViewed: type === 'viewed',
      timestamps: targets,
    };
    const results = await this.post(recipients, this.envelope(timestamp, { receiptMessage }));
    return this.finishSend(timestamp, results, 'receipt');
  }

  // ---- people -------------------------------------------------------------------------------

  private getUserStatus(p: Params): UserStatus[] {
    const recipients = numbers(p, 'recipient');
    if (recipients.length === 0) throw invalidParams('recipient is required');
    return recipients.map((number) => {
      const a = this.store.account(number);
      return { recipient: number, number, uuid: a?.uuid ?? null, isRegistered: a !== undefined, username: null };
    });
  }

  private listContacts(p: Params): unknown[] {
    const wanted = numbers(p, 'recipient');
    const all = optBool(p, 'allRecipients');
    const onlyBlocked = p.blocked === true;
    const onlyUnblocked = p.blocked === false;
    const known = new Map(this.store.contacts(this.me.number).map((c) => [c.number, c.blocked]));
    let list = all
      ? this.store
          .accounts()
          .map((a) => a.number)
          .filter((n) => n !== this.me.number)
      : [...known.keys()];
    if (all) for (const n of known.keys()) if (!list.includes(n)) list.push(n);
    if (wanted.length > 0) list = list.filter((n) => wanted.includes(n));
    return list
      .map((number) => ({ number, blocked: known.get(number) ?? false, account: this.store.account(number) }))
      .filter((c) => !(onlyBlocked && !c.blocked) && !(onlyUnblocked && c.blocked))
      .map(({ number, blocked, account }) => ({
        number,
        uuid: account?.uuid ?? null,
        username: null,
        name: account?.profileName ?? '',
        givenName: null,
        familyName: null,
        nickName: null,
        note: null,
        color: null,
        isBlocked: blocked,
        isHidden: false,
        messageExpirationTime: 0,
        profileSharing: false,
        unregistered: account === undefined,
        profile: {
          lastUpdateTimestamp: 0,
          givenName: account?.profileName ?? null,
          familyName: null,
          about: null,
          aboutEmoji: null,
          hasAvatar: false,
          mobileCoinAddress: null,
        },
      }));
  }

  private setBlocked(p: Params, blocked: boolean): Record<string, never> {
    const recipients = numbers(p, 'recipient');
    const groupIds = strings(p, 'groupId');
    if (recipients.length === 0 && groupIds.length === 0) throw invalidParams('recipient or groupId is required');
    for (const number of recipients) this.store.setBlocked(this.me.number, number, blocked);
    for (const groupId of groupIds) {
      if (!this.store.group(groupId)) throw userError(`Invalid group id: ${groupId}`);
      this.store.setGroupBlocked(this.me.number, groupId, blocked);
    }
    return {};
  }

  // ---- groups -------------------------------------------------------------------------------

  private memberGroup(groupId: string): GroupRow {
    const group = this.store.group(groupId);
    if (!group) throw userError(`Invalid group id: ${groupId}`);
    if (!this.store.members(groupId).some((m) => m.number === this.me.number)) {
      throw userError(`You are not a member of group ${groupId}`);
    }
    return group;
  }

  private registered(list: readonly string[], role: string): void {
    const missing = list.filter((n) => !this.store.account(n));
    if (missing.length > 0) throw userError(`Cannot add ${role}: not registered: ${missing.join(', ')}`);
  }

  private async updateGroup(p: Params): Promise<{ groupId: string; timestamp: number }> {
    const groupId = optString(p, 'groupId');
    const name = optString(p, 'name');
    const description = optString(p, 'description');
    const add = numbers(p, 'members');
    const remove = numbers(p, 'removeMembers');
    const admins = numbers(p, 'admins');
    const removeAdmins = numbers(p, 'removeAdmins');
    this.registered(add, 'members');
    const timestamp = this.nextTimestamp();
    let id: string;
    if (groupId === undefined) {
      id = randomBytes(32).toString('base64');
      this.store.createGroup(id, name ?? '', description ?? null, this.me.number, add);
    } else {
      const group = this.memberGroup(groupId);
      const members = new Set(this.store.members(groupId).map((m) => m.number));
      const notMembers = [...admins, ...removeAdmins].filter((n) => !members.has(n) && !add.includes(n));
      if (notMembers.length > 0) throw userError(`Not members of the group: ${notMembers.join(', ')}`);
      this.store.changeGroup(groupId, {
        name: name ?? group.name,
        description: description ?? group.description,
        add,
        remove,
        admins,
        removeAdmins,
      });
      id = groupId;
    }
    const group = this.store.group(id)!;
    const others = this.store
      .members(id)
      .filter((m) => m.number !== this.me.number)
      .map((m) => m.number);
    // Members (and those just removed) learn of the change as a group update message.
    const info = { groupId: id, groupName: group.name, revision: group.revision, type: 'UPDATE' };
    const dataMessage: DataMessage = {
      timestamp,
      message: null,
      expiresInSeconds: 0,
      viewOnce: false,
      groupInfo: info,
    };
    await this.post([...others, ...remove], this.envelope(timestamp, { dataMessage }));
    return { groupId: id, timestamp };
  }

  private listGroups(): GroupInfo[] {
    const address = (m: { number: string; uuid: string }): RecipientAddress => ({ number: m.number, uuid: m.uuid });
    return this.store.groupsOf(this.me.number).map((g) => {
      const members = this.store.members(g.id);
      return {
        id: g.id,
        name: g.name,
        description: g.description,
        isMember: true,
        isBlocked: this.store.isGroupBlocked(this.me.number, g.id),
        messageExpirationTime: 0,
        members: members.map(address),
        pendingMembers: [],
        requestingMembers: [],
        admins: members.filter((m) => m.admin).map(address),
        banned: [],
        permissionAddMember: 'EVERY_MEMBER',
        permissionEditDetails: 'EVERY_MEMBER',
        permissionSendMessage: 'EVERY_MEMBER',
        groupInviteLink: null,
      };
    });
  }

  // ---- linking ------------------------------------------------------------------------------

  private startLink(): { deviceLinkUri: string } {
    const uuid = randomUUID();
    const pubKey = randomBytes(33).toString('base64url');
    this.store.createLink(uuid, pubKey, this.me.number);
    return { deviceLinkUri: `sgnl://linkdevice?uuid=${uuid}&pub_key=${pubKey}` };
  }

  private parseLinkUri(uri: string): { uuid: string; pubKey: string } {
    const m = /^sgnl:\/\/linkdevice\?uuid=([0-9a-f-]{36})&pub_key=([A-Za-z0-9_%+/=-]+)$/.exec(uri);
    if (!m) throw invalidParams('deviceLinkUri must be sgnl://linkdevice?uuid=…&pub_key=…');
    return { uuid: m[1]!, pubKey: decodeURIComponent(m[2]!) };
  }

  /** Waits, bounded by --link-timeout, until a primary accepts the link with addDevice. */
  private async finishLink(p: Params): Promise<Record<string, unknown>> {
    const uri = reqString(p, 'deviceLinkUri');
    const { uuid, pubKey } = this.parseLinkUri(uri);
    const link = this.store.link(uuid);
    if (!link || link.pubKey !== pubKey) throw userError('Unknown device link URI: start one with startLink');
    const deviceName = optString(p, 'deviceName');
    if (deviceName) this.store.nameLink(uuid, deviceName);
    const deadline = Date.now() + this.o.linkTimeoutMs;
    for (;;) {
      const now = this.store.link(uuid);
      if (now?.primaryNumber) return { deviceLinkUri: uri, number: now.primaryNumber };
      if (this.closed) throw new RpcFailure(RpcErrorCode.IO_ERROR, 'Link aborted: the daemon is shutting down');
      const left = deadline - Date.now();
      if (left <= 0) {
        throw userError(
          `Link request timed out: no primary device accepted it within ${Math.round(this.o.linkTimeoutMs / 1000)} s`,
        );
      }
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(t);
          this.waits.delete(wake);
          resolve();
        };
        const t = setTimeout(wake, Math.min(LINK_POLL_MS, left));
        this.waits.add(wake);
      });
    }
  }

  /** The primary's side of linking: accepts a device link URI (signal-cli's addDevice). */
  private addDevice(p: Params): Record<string, never> {
    const { uuid, pubKey } = this.parseLinkUri(reqString(p, 'uri'));
    const link = this.store.link(uuid);
    if (!link || link.pubKey !== pubKey) throw userError('Unknown device link URI');
    if (Date.now() - link.createdAt > this.o.linkTimeoutMs * 2) throw userError('Device link URI has expired');
    if (!this.store.acceptLink(uuid, this.me.number) && link.primaryNumber !== this.me.number) {
      throw userError('Device link URI was already used');
    }
    return {};
  }

  private listDevices(): unknown[] {
    return [
      { id: 1, name: this.me.profileName, createdTimestamp: 0, lastSeenTimestamp: Date.now() },
      ...this.store.devices(this.me.number).map((d, i) => ({
        id: i + 2,
        name: d.deviceName ?? d.requester,
        createdTimestamp: d.acceptedAt,
        lastSeenTimestamp: d.acceptedAt,
      })),
    ];
  }
}

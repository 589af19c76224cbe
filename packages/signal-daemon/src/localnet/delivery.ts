/**
 * Delivery from the local network: a daemon moves its account's mail into its inbox. It learns of
 * new mail as soon as the file changes (a watch of the file's directory: every commit of another
 * daemon writes the WAL), with a poll of SQLite's data_version as a safety net. A burst is moved
 * in batches of up to DELIVERY_BATCH messages, each one transaction of the inbox (a file of its
 * own) that stores them and records how far the mailbox has been read (mail-position.ts: the rows
 * are removed from the mailbox later, in the background). So a delivery takes the network file's
 * write lock only when the network must learn something first (a new sender, an attachment), and
 * then the way sends do (../writes.ts): while another daemon holds it, the event loop goes on (SSE
 * writes, replies) instead of sleeping in SQLite's busy wait. One delivery runs at a time; changes
 * noticed meanwhile start the next one when it ends.
 */
import { type FSWatcher, watch } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Envelope, Logger } from '@vigil/shared-types';
import { writeFileAtomic } from '@vigil/shared-types/node';
import type { Inbox } from '../inbox.js';
import { type FaultEpisode, isStorageFault, RETRY_INITIAL_MS, RETRY_MAX_MS } from './fault.js';
import type { MailPosition } from './mail-position.js';
import type { Records } from './records.js';
import type { AccountRow, NetworkStore } from './store.js';

/** The most messages moved in one transaction (a few ms of write lock at most). */
export const DELIVERY_BATCH = 512;
/** The safety net's period: a change the watch missed is noticed within this. */
const POLL_MS = 250;

export interface DeliveryOptions {
  readonly store: NetworkStore;
  readonly records: Records;
  readonly inbox: Inbox;
  readonly position: MailPosition;
  readonly me: AccountRow;
  readonly dataDir: string;
  readonly logger: Logger;
  /** A full disk or an I/O error: one episode for the whole backend (see fault.ts). */
  readonly storage: FaultEpisode;
}

/** The attachments an envelope carries: a message's, a story's. */
function attachmentsOf(e: Envelope): { id: string }[] {
  const story = e.storyMessage?.fileAttachment as { id: string } | undefined;
  return [...((e.dataMessage?.attachments ?? []) as { id: string }[]), ...(story ? [story] : [])];
}

/**
 * The JSON of a delivered envelope, `{ ...envelope, serverDeliveredTimestamp }`, as JSON.stringify
 * writes it, made from the mail's stored JSON without serialising the envelope again.
 */
function delivered(mail: { envelope: Envelope; json: string }, now: number): string {
  const { envelope, json } = mail;
  const spliced = json.length > 2 && json.endsWith('}') && !('serverDeliveredTimestamp' in envelope);
  return spliced
    ? `${json.slice(0, -1)},"serverDeliveredTimestamp":${now}}`
    : JSON.stringify({ ...envelope, serverDeliveredTimestamp: now });
}

const groupOf = (e: Envelope): string | null => e.dataMessage?.groupInfo?.groupId ?? e.storyMessage?.groupId ?? null;

export class Delivery {
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | null = null;
  private scheduled = false;
  private running = false;
  /** A change was noticed while a delivery ran: another follows it. */
  private again = false;
  private lastDataVersion = -1;
  private closed = false;
  private readonly waits = new Set<() => void>();
  /** A failure other than of the storage: retried with backoff, logged once per episode. */
  private fault: { since: number; failures: number; delayMs: number; timer: NodeJS.Timeout | null } | null = null;

  constructor(private readonly o: DeliveryOptions) {}

  /** Delivers what is waiting, then on every change of the file. */
  start(): void {
    this.run();
    const { logger } = this.o;
    try {
      this.watcher = watch(dirname(this.o.store.file), { persistent: false }, () => this.schedule());
      this.watcher.on('error', (err) => {
        logger.warn('local network watch failed; polling only', { error: String(err) });
        this.watcher?.close();
        this.watcher = null;
      });
    } catch (err) {
      logger.warn('cannot watch the local network directory; polling only', { error: String(err) });
    }
    this.poll = setInterval(() => this.schedule(), POLL_MS);
    this.poll.unref();
  }

  /** Stops watching; the delivery under way (if any) ends at its next batch. */
  stop(): void {
    this.closed = true;
    this.watcher?.close();
    if (this.poll) clearInterval(this.poll);
    if (this.fault?.timer) clearTimeout(this.fault.timer);
    for (const wake of this.waits) wake();
  }

  /** After a storage fault ended: look again whatever data_version says. */
  retry(): void {
    this.lastDataVersion = -1;
    this.schedule();
  }

  /**
   * Our own connection's commits do not change data_version: note-to-self mail is delivered
   * directly, in the next turn.
   */
  soon(): void {
    setImmediate(() => {
      if (!this.closed && !this.o.storage.active) this.run();
    });
  }

  /** Resolves at the next delivery (the file changed), at close, or after `ms`. */
  waitForChange(ms: number): Promise<void> {
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

  /** In the next turn, when the file changed since the last look. */
  private schedule(): void {
    // While a fault lasts, its backoff (not every change of the file) decides when to try again.
    if (this.scheduled || this.closed || this.o.storage.active || this.fault?.timer) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.closed) return;
      try {
        const v = this.o.store.dataVersion();
        if (v === this.lastDataVersion) return;
        this.lastDataVersion = v;
      } catch {
        // run handles its failures; dataVersion failing is retried at the next poll
        this.lastDataVersion = -1;
      }
      this.run();
    });
  }

  /** Delivers, and handles a failure: one log line per episode, retries with backoff. */
  private run(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.deliver().then(
      (moved) => this.delivered(moved),
      (err: unknown) => this.failed(err),
    );
  }

  private delivered(moved: number): void {
    this.running = false;
    if (moved > 0) this.o.storage.ok();
    if (this.fault) {
      this.o.logger.info('delivery from the local network works again', {
        failedAttempts: this.fault.failures,
        forS: Math.round((Date.now() - this.fault.since) / 1000),
      });
      this.fault = null;
    }
    for (const wake of this.waits) wake();
    if (this.again) {
      this.again = false;
      this.run();
    }
  }

  private failed(err: unknown): void {
    this.running = false;
    this.again = false;
    this.lastDataVersion = -1;
    if (this.closed) return;
    if (isStorageFault(err)) {
      this.o.storage.fail(err, 'delivery from the local network');
      return;
    }
    this.fault ??= { since: Date.now(), failures: 0, delayMs: RETRY_INITIAL_MS, timer: null };
    const f = this.fault;
    f.failures++;
    if (f.failures === 1) {
      this.o.logger.error('delivery from the local network failed; retrying with backoff', { error: String(err) });
    }
    const delay = f.delayMs;
    f.delayMs = Math.min(f.delayMs * 2, RETRY_MAX_MS);
    f.timer = setTimeout(() => {
      f.timer = null;
      if (!this.closed) this.run();
    }, delay);
    f.timer.unref();
  }

  /** Moves this account's mail into the inbox, oldest first, one transaction per batch; how many. */
  private async deliver(): Promise<number> {
    const { store, inbox, position, me } = this.o;
    let moved = 0;
    while (!this.closed) {
      const { envelopes, lastId } = store.mail(me.number, DELIVERY_BATCH, position.at);
      if (envelopes.length === 0) break;
      const now = Date.now();
      const mail = this.accepted(envelopes);
      const accepted = mail.map((m) => ({ ...m.envelope, serverDeliveredTimestamp: now }));
      for (const e of accepted) this.saveAttachments(e);
      const json = mail.map((m) => delivered(m, now));
      // What the network must know before anyone reads these messages, written first (writing it
      // again after a crash changes nothing); seldom anything once a sender has written before.
      if (this.mustNote(accepted)) await store.write(() => this.noteSenders(accepted));
      if (this.closed) break;
      await inbox.write(() => inbox.append(accepted, () => position.record(lastId), json));
      position.recorded(lastId);
      moved += envelopes.length;
      if (accepted.length < envelopes.length) {
        this.o.logger.info('dropped messages from blocked senders', { count: envelopes.length - accepted.length });
      }
      if (envelopes.length < DELIVERY_BATCH) break;
    }
    return moved;
  }

  /**
   * The envelopes not refused: a blocked sender's messages, and messages (and stories) to a
   * blocked group, are not delivered. Each sender and group is looked up once per batch.
   */
  private accepted<T extends { envelope: Envelope }>(envelopes: readonly T[]): T[] {
    const { store, me } = this.o;
    const blocked = new Map<string, boolean>();
    const isBlocked = (key: string, look: () => boolean) => {
      const known = blocked.get(key);
      if (known !== undefined) return known;
      const b = look();
      blocked.set(key, b);
      return b;
    };
    return envelopes.filter(({ envelope: e }) => {
      const sender = e.sourceNumber;
      if (sender && isBlocked(`n:${sender}`, () => store.isBlocked(me.number, sender))) return false;
      const groupId = groupOf(e);
      return !(groupId && isBlocked(`g:${groupId}`, () => store.isGroupBlocked(me.number, groupId)));
    });
  }

  /** Whether noteSenders would write anything: an attachment, or a sender not yet a trusted contact. */
  private mustNote(envelopes: readonly Envelope[]): boolean {
    const { records, me } = this.o;
    const senders = new Set<string>();
    for (const e of envelopes) {
      if (attachmentsOf(e).length > 0) return true;
      const sender = e.sourceNumber;
      if (sender && sender !== me.number) senders.add(sender);
    }
    for (const sender of senders) if (!records.senderNoted(me.number, sender)) return true;
    return false;
  }

  /**
   * A sender becomes a contact and its identity key is trusted on first use (once per sender in a
   * batch); each attachment is recorded as the sender's.
   */
  private noteSenders(envelopes: readonly Envelope[]): void {
    const { store, records, me } = this.o;
    const senders = new Set<string>();
    const now = Date.now();
    for (const e of envelopes) {
      const sender = e.sourceNumber;
      if (!sender || sender === me.number) continue;
      if (!senders.has(sender)) {
        senders.add(sender);
        store.addContact(me.number, sender);
        records.trustOnFirstUse(me.number, sender);
      }
      for (const a of attachmentsOf(e)) records.receivedAttachment(me.number, a.id, sender, groupOf(e), now);
    }
  }

  /** Received attachments are files in the data directory, written before the message is acknowledged. */
  private saveAttachments(e: Envelope): void {
    for (const a of attachmentsOf(e)) {
      const row = this.o.store.attachment(a.id);
      if (row) writeFileAtomic(join(this.o.dataDir, 'attachments', a.id), row.data);
    }
  }
}

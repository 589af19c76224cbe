/**
 * Retention of the network file's tables that grow with every message: the index of sent
 * messages (what reactions, remote deletes and edits may point at; one row per party of a send),
 * mail nobody picked up, and the attachments messages carried. Rows older than the retention are
 * deleted in small batches, each its own short write (see ../writes.ts), with a yield to the event
 * loop between batches, so sends never wait behind a long delete. Every daemon on the file prunes;
 * the deletes are idempotent, so it does not matter which one gets there first.
 *
 * Each daemon also prunes what its own account received: the records of received attachments
 * (who sent them, for getAttachment) and their files in its data directory, the files first (a
 * crash in between leaves a record whose file is gone: "not found", as after the retention).
 *
 * The inbox has its own retention (inbox.ts, --retention-hours/--retention-messages).
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@vigil/shared-types';
import type Database from 'better-sqlite3';

/** Rows deleted by one statement: a few ms of write lock at most. */
export const PRUNE_BATCH = 1000;
/** How often to prune: a tenth of the retention, between 1 s and 1 min. */
export const pruneIntervalMs = (retentionMs: number): number =>
  Math.min(60_000, Math.max(1000, Math.round(retentionMs / 10)));

export class NetworkRetention {
  private readonly s;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** The first failure of an episode is logged; the next success ends it. */
  private failingSince: number | null = null;

  constructor(
    db: Database.Database,
    private readonly write: (fn: () => void) => Promise<void>,
    readonly retentionMs: number,
    private readonly logger: Logger,
    /** The account whose received attachments this daemon prunes, and the directory of their files. */
    private readonly received?: { readonly owner: string; readonly dir: string },
  ) {
    this.s = {
      // Distinct authors by a skip scan of the primary key (a handful on one host).
      authors: db
        .prepare(
          'WITH RECURSIVE a(x) AS (SELECT MIN(author) FROM sent_messages UNION ALL ' +
            'SELECT (SELECT MIN(author) FROM sent_messages WHERE author > x) FROM a WHERE x IS NOT NULL) ' +
            'SELECT x FROM a WHERE x IS NOT NULL',
        )
        .pluck(),
      // A range of the primary key (author, timestamp, party): no index of its own needed.
      sent: db.prepare(
        'DELETE FROM sent_messages WHERE (author, timestamp, party) IN (SELECT author, timestamp, party ' +
          'FROM sent_messages WHERE author = ? AND timestamp < ? LIMIT ?)',
      ),
      // Ids grow with time: the oldest rows first, stopping at the first batch with a young row.
      mail: db.prepare(
        'DELETE FROM mailbox WHERE id IN (SELECT id FROM mailbox ORDER BY id LIMIT ?) AND created_at < ?',
      ),
      attachments: db.prepare(
        'DELETE FROM attachments WHERE rowid IN (SELECT rowid FROM attachments ORDER BY rowid LIMIT ?) ' +
          'AND created_at < ?',
      ),
      receivedIds: db
        .prepare('SELECT id FROM received_attachments WHERE owner = ? AND received_at < ? ORDER BY received_at LIMIT ?')
        .pluck(),
      received: db.prepare('DELETE FROM received_attachments WHERE owner = ? AND id = ?'),
    };
  }

  /** Prunes now and then every `pruneIntervalMs`. */
  start(): void {
    const tick = () => {
      this.running = this.pruneOnce()
        .then(() => undefined)
        .finally(() => {
          this.running = null;
          if (!this.stopped) {
            this.timer = setTimeout(tick, pruneIntervalMs(this.retentionMs));
            this.timer.unref();
          }
        });
    };
    tick();
  }

  /** Stops, after the batch under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** Deletes every row past the retention, a batch at a time; how many. Failures are logged, not thrown. */
  async pruneOnce(now = Date.now()): Promise<number> {
    const cutoff = now - this.retentionMs;
    let deleted = 0;
    try {
      for (const author of this.s.authors.all() as string[]) {
        deleted += await this.batches(() => this.s.sent.run(author, cutoff, PRUNE_BATCH).changes);
      }
      deleted += await this.batches(() => this.s.mail.run(PRUNE_BATCH, cutoff).changes);
      deleted += await this.batches(() => this.s.attachments.run(PRUNE_BATCH, cutoff).changes);
      if (this.received) deleted += await this.pruneReceived(this.received, cutoff);
      if (this.failingSince !== null) {
        this.logger.info('local network retention works again', {
          forS: Math.round((Date.now() - this.failingSince) / 1000),
        });
        this.failingSince = null;
      }
    } catch (err) {
      if (this.failingSince === null) {
        this.failingSince = Date.now();
        this.logger.warn('local network retention failed; trying again later', { error: String(err) });
      }
    }
    return deleted;
  }

  /** The received attachments older than `cutoff`: their files, then their records. */
  private async pruneReceived(received: { owner: string; dir: string }, cutoff: number): Promise<number> {
    let ids: string[] = [];
    return this.batches(
      () => {
        let n = 0;
        for (const id of ids) n += this.s.received.run(received.owner, id).changes;
        return n;
      },
      () => {
        ids = this.s.receivedIds.all(received.owner, cutoff, PRUNE_BATCH) as string[];
        for (const id of ids) rmSync(join(received.dir, id), { force: true });
      },
    );
  }

  /** Runs `batch` until it deletes less than a full batch, yielding between batches; `before` runs before each. */
  private async batches(batch: () => number, before?: () => void): Promise<number> {
    let total = 0;
    for (;;) {
      if (this.stopped) return total;
      before?.();
      let n = 0;
      await this.write(() => {
        n = batch();
      });
      total += n;
      if (n < PRUNE_BATCH) return total;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

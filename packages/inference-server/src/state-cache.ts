/**
 * The saved-state cache: the evaluated state of conversations evicted from their slot, so that a
 * conversation that comes back is restored instead of evaluated again (llama-server's
 * `--cache-ram`). A slot's state is saved just before a request overwrites it, and restored into
 * the slot a request gets when a saved state shares a longer prefix with its prompt than the
 * slot's own. States are files written by node-llama-cpp (`saveStateToFile`, the sequence's KV
 * cells and tokens) in a private directory, on a RAM file system where there is one (/dev/shm);
 * before a save, the oldest are dropped to leave room for it (its size estimated from the states
 * saved before: bytes per token), and after it, until the total is within the bound again (the
 * new state itself last); one save at a time. The directory is removed at close;
 * directories left by a process that died are removed at the next start.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pidAlive } from '@vigil/shared-types/node';
import type { LlamaContextSequence, Token } from 'node-llama-cpp';
import type { Logger } from './logger.js';
import { commonPrefix, isPrefixHit } from './slots.js';

/** A state is saved only when at least this many tokens of it would be lost. */
export const MIN_SAVED_TOKENS = 64;
const DIR_PREFIX = 'vigil-inference-state-';

interface Entry {
  readonly file: string;
  /** The state's tokens, 4 bytes each outside V8's heap (the index's only per-token cost). */
  readonly tokens: Uint32Array;
  readonly bytes: number;
  readonly lastUsed: number;
}

/** What the cache did for one request (for the metrics and the access log). */
export interface PrepareResult {
  /** Tokens restored from a saved state (0: none). */
  readonly restored: number;
  /** Whether the slot's previous state was saved. */
  readonly saved: boolean;
}

/** Where states go by default: a RAM file system when there is one, else the OS temp dir. */
export function defaultStateDir(): string {
  try {
    if (statSync('/dev/shm').isDirectory()) return '/dev/shm';
  } catch {
    // none
  }
  return tmpdir();
}

export class StateCache {
  private readonly entries: Entry[] = [];
  private readonly dir: string;
  private seq = 0;
  private clock = 0;
  private bytesPerToken = 0;
  private failing = false;
  /** One prepare at a time: the bound holds with saves in flight, and a state is restored once. */
  private queue: Promise<unknown> = Promise.resolve();
  total = 0;
  saves = 0;
  restores = 0;
  evictions = 0;

  constructor(
    base: string,
    readonly maxBytes: number,
    private readonly logger: Logger,
  ) {
    mkdirSync(base, { recursive: true });
    removeStale(base);
    // mkdtemp creates it 0700: states are readable by this user only.
    this.dir = mkdtempSync(join(base, `${DIR_PREFIX}${process.pid}-`));
  }

  get size(): number {
    return this.entries.length;
  }

  /** The saved state sharing the longest useful prefix with `tokens`, and that prefix. */
  best(tokens: readonly Token[]): { entry: Entry; matched: number } | null {
    let found: { entry: Entry; matched: number } | null = null;
    for (const entry of this.entries) {
      const matched = commonPrefix(entry.tokens, tokens);
      if (isPrefixHit(matched, tokens.length) && (found === null || matched > found.matched))
        found = { entry, matched };
    }
    return found;
  }

  /**
   * Before a request with prompt `tokens` runs on `sequence` (held exclusively): restores a saved
   * state that shares a longer prefix than the sequence's own, and saves the sequence's state
   * first when the request would erase enough of it. Failures are logged once per episode and
   * leave the sequence usable (empty at worst): the request is then evaluated cold.
   */
  prepare(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<PrepareResult> {
    const run = this.queue.then(() => this.prepareNow(sequence, tokens));
    this.queue = run.catch(() => {});
    return run;
  }

  private async prepareNow(sequence: LlamaContextSequence, tokens: readonly Token[]): Promise<PrepareResult> {
    const held = sequence.contextTokens;
    const matched = commonPrefix(held, tokens);
    const found = this.best(tokens);
    const restore = found !== null && found.matched > matched;
    const keep = restore ? found.entry : null;
    let saved = false;
    if (held.length - matched >= MIN_SAVED_TOKENS && !this.has(held)) saved = await this.save(sequence, held, keep);
    if (!restore) return { restored: 0, saved };
    const { entry } = found;
    try {
      // Emptied first: node-llama-cpp forgets the sequence's tokens before loading, so a load that
      // fails must not leave cells it no longer knows of.
      await sequence.clearHistory();
      await sequence.loadStateFromFile(entry.file, { acceptRisk: true });
      this.drop(entry);
      this.restores++;
      this.ok();
      return { restored: Math.min(commonPrefix(sequence.contextTokens, tokens), tokens.length - 1), saved };
    } catch (err) {
      this.drop(entry);
      this.fail('cannot restore a saved state: evaluating the prompt instead', err);
      await sequence.clearHistory().catch(() => {});
      return { restored: 0, saved };
    }
  }

  /**
   * Saves `sequence`'s state (its tokens are `tokens`), evicting the oldest others (never `keep`,
   * about to be restored) to stay in bounds; when that is not enough, the new state goes.
   */
  private async save(sequence: LlamaContextSequence, tokens: readonly Token[], keep: Entry | null): Promise<boolean> {
    const estimate = this.bytesPerToken * tokens.length;
    if (estimate > this.maxBytes - (keep?.bytes ?? 0)) return false;
    // A saved state that this one extends is superseded by it.
    for (const e of [...this.entries]) {
      if (e !== keep && commonPrefix(e.tokens, tokens) === e.tokens.length) this.drop(e);
    }
    this.evictTo(this.maxBytes - estimate, keep);
    const file = join(this.dir, `${++this.seq}.state`);
    try {
      const { fileSize } = await sequence.saveStateToFile(file);
      this.bytesPerToken = Math.max(this.bytesPerToken, Math.ceil(fileSize / Math.max(1, tokens.length)));
      this.entries.push({ file, tokens: Uint32Array.from(tokens), bytes: fileSize, lastUsed: ++this.clock });
      this.total += fileSize;
      this.saves++;
      this.evictTo(this.maxBytes, keep);
      const entry = this.entries.find((e) => e.file === file);
      if (entry && this.total > this.maxBytes) this.drop(entry);
      this.ok();
      return this.entries.some((e) => e.file === file);
    } catch (err) {
      rmSync(file, { force: true });
      this.fail('cannot save a slot state: it will be evaluated again when it comes back', err);
      return false;
    }
  }

  private has(tokens: readonly Token[]): boolean {
    return this.entries.some(
      (e) => e.tokens.length === tokens.length && commonPrefix(e.tokens, tokens) === tokens.length,
    );
  }

  /** Drops the least recently saved states but `keep` until the total is at most `bytes`. */
  private evictTo(bytes: number, keep: Entry | null = null): void {
    this.entries.sort((a, b) => a.lastUsed - b.lastUsed);
    for (const e of [...this.entries]) {
      if (this.total <= bytes) return;
      if (e === keep) continue;
      this.drop(e);
      this.evictions++;
    }
  }

  private drop(entry: Entry): void {
    const i = this.entries.indexOf(entry);
    if (i < 0) return;
    this.entries.splice(i, 1);
    this.total -= entry.bytes;
    rmSync(entry.file, { force: true });
  }

  private ok(): void {
    if (this.failing) this.logger.info('saved-state cache working again');
    this.failing = false;
  }

  private fail(msg: string, err: unknown): void {
    if (!this.failing) this.logger.warn(msg, { error: err instanceof Error ? err.message : String(err) });
    this.failing = true;
  }

  /** Removes every state and the directory. */
  dispose(): void {
    this.entries.length = 0;
    this.total = 0;
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Removes state directories of processes that are gone (a crash leaves its states behind). */
function removeStale(base: string): void {
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const pid = Number(name.slice(DIR_PREFIX.length).split('-')[0]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !pidAlive(pid)) {
      try {
        rmSync(join(base, name), { recursive: true, force: true });
      } catch {
        // another user's, or already gone
      }
    }
  }
}

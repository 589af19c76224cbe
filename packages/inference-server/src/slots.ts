/**
 * Which free slot a request gets (llama-server's slot choice). Each slot's context sequence keeps
 * the tokens it evaluated last; node-llama-cpp evaluates only what differs from them. So a request
 * goes to the free slot whose tokens share the longest prefix with its prompt (an agent's
 * conversation comes back to the slot that holds its previous turn), ties to the least recently
 * used; when no slot shares a useful prefix, to the least recently used free slot (an empty slot
 * first), so that a newcomer evicts the conversation most likely finished. Pure.
 */

/** A free slot as the choice sees it. */
export interface SlotView {
  readonly slot: number;
  /** Tokens at the start of the slot's sequence equal to the prompt's. */
  readonly matched: number;
  /** When the slot was last handed out (a counter; 0: never). */
  readonly lastUsed: number;
}

/**
 * Part of the prompt a slot's prefix must cover to count as a match (llama-server's
 * `--slot-prompt-similarity` default): a shared system prompt alone does not pull a new
 * conversation onto a slot that holds a long one, when another slot is as good.
 */
export const MIN_PREFIX_SHARE = 0.1;

/** Whether `matched` tokens of a `promptLength`-token prompt are a useful prefix. */
export function isPrefixHit(matched: number, promptLength: number): boolean {
  return matched > 0 && matched >= MIN_PREFIX_SHARE * promptLength;
}

/** The slot a request with a `promptLength`-token prompt gets among `free`; undefined if none. */
export function chooseSlot(free: readonly SlotView[], promptLength: number): SlotView | undefined {
  let best: SlotView | undefined;
  for (const s of free) {
    if (best === undefined || better(s, best, promptLength)) best = s;
  }
  return best;
}

function better(a: SlotView, b: SlotView, promptLength: number): boolean {
  const ma = isPrefixHit(a.matched, promptLength) ? a.matched : 0;
  const mb = isPrefixHit(b.matched, promptLength) ? b.matched : 0;
  if (ma !== mb) return ma > mb;
  if (a.lastUsed !== b.lastUsed) return a.lastUsed < b.lastUsed;
  return a.slot < b.slot;
}

/** Length of the common prefix of two token lists. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

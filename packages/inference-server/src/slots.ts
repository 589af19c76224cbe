/**
 * Which free slot a request gets (llama-server's slot choice). Each slot's context sequence keeps
 * the tokens it evaluated last; node-llama-cpp evaluates only what differs from them. So a request
 * goes to the free slot whose tokens share the longest prefix with its prompt (an agent's
 * conversation comes back to the slot that holds its previous turn), ties to the least recently
 * used; when no slot shares a useful prefix, to the least recently used free slot (an empty slot
 * first), so that a newcomer evicts the conversation most likely finished. When requests wait, a
 * slot given back goes to the waiter whose prompt shares the longest prefix with it (ties: the
 * one waiting longest), not simply the first: a conversation's next turn does not lose its slot
 * to a newcomer queued before it. No one starves: a waiter passed over MAX_PASSED_OVER times
 * gets the next slot given back. Pure.
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

/** A waiting request as the choice of who gets a slot given back sees it. */
export interface WaiterView {
  /** Tokens at the start of the given-back slot's sequence equal to the waiter's prompt's. */
  readonly matched: number;
  readonly promptLength: number;
  /** How many later waiters got a slot before it. */
  readonly passedOver: number;
}

/**
 * How many times a waiter may be passed over for one with a better prefix before it gets the
 * next slot given back, whatever that slot holds: its wait grows by at most that many
 * completions (on a host of one conversation per slot and a few newcomers, about one or two).
 */
export const MAX_PASSED_OVER = 4;

/**
 * Index (in arrival order, oldest first) of the waiter that gets a slot given back: the oldest
 * when it was passed over MAX_PASSED_OVER times; else the one with the longest useful prefix on
 * that slot (isPrefixHit), ties to the oldest; with no useful prefix, the oldest. -1 when none.
 */
export function chooseWaiter(waiters: readonly WaiterView[]): number {
  if (waiters.length === 0) return -1;
  if (waiters[0]!.passedOver >= MAX_PASSED_OVER) return 0;
  let best = 0;
  let bestMatched = 0;
  for (const [i, w] of waiters.entries()) {
    const m = isPrefixHit(w.matched, w.promptLength) ? w.matched : 0;
    if (m > bestMatched) {
      best = i;
      bestMatched = m;
    }
  }
  return best;
}

/** Length of the common prefix of two token lists. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

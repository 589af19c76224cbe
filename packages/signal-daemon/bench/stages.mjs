// Where one message's send -> SSE latency goes, from the envelope's own stamps: A stamps
// `serverReceivedTimestamp` when its `send` handler builds the envelope, B stamps
// `serverDeliveredTimestamp` when it reads the mail to move it into its inbox. With the bench's
// times of sending and of arrival (on the same host's clock) a message's latency splits into:
//
//   toA:   the client's write -> A's handler (the socket, A's event loop, the JSON-RPC parse)
//   aToB:  A's handler -> B read the mail (A's group commit and its commit, B noticing the change)
//   bToSse: B read the mail -> the event at the client (B's inbox commit, the SSE write, the read)
//
// The daemons' stamps are whole milliseconds (Date.now()), so each stage is within 1 ms.

/** The wall clock in fractional ms at `ns` of the run's monotonic clock started at `t0Ns`. */
export function wallClock(t0Ns) {
  const wallAtT0 = performance.timeOrigin + performance.now() - Number(process.hrtime.bigint() - t0Ns) / 1e6;
  return (ns) => wallAtT0 + ns / 1e6;
}

/** Latency samples in nanoseconds → {p50, p99, max} in milliseconds (nearest rank). */
export function percentiles(samples, n) {
  if (n === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const a = samples.subarray(0, n).sort();
  const at = (q) => a[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))] / 1e6;
  return { p50: at(0.5), p99: at(0.99), max: a[n - 1] / 1e6 };
}

export const STAGES = ['toA', 'aToB', 'bToSse'];

/** Collects the stages of up to `max` messages. */
export class Stages {
  constructor(max) {
    this.max = max;
    this.n = 0;
    this.samples = Object.fromEntries(STAGES.map((s) => [s, new Float64Array(max)]));
  }

  /** A message sent at wall ms `sent`, arrived at `arrived`, with its envelope's stamps. */
  add(sent, envelope, arrived) {
    const received = envelope?.serverReceivedTimestamp;
    const delivered = envelope?.serverDeliveredTimestamp;
    if (this.n >= this.max || typeof received !== 'number' || typeof delivered !== 'number') return;
    const ms = { toA: received - sent, aToB: delivered - received, bToSse: arrived - delivered };
    // Negative values are the stamps' rounding down (at most 1 ms): counted as 0.
    for (const s of STAGES) this.samples[s][this.n] = Math.max(0, ms[s]) * 1e6;
    this.n++;
  }

  /** Per stage, {p50, p99, max} in ms; null when no envelope carried both stamps. */
  result() {
    if (this.n === 0) return null;
    return Object.fromEntries(STAGES.map((s) => [s, percentiles(this.samples[s], this.n)]));
  }
}

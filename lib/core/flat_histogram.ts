/**
 * A cumulative histogram a worker reports among its numeric stats counters, flat: one counter
 * `<name>_bucket_<i>` per bucket (counts per bucket, not cumulative; the last bucket is +Inf) and
 * `<name>_sum`. Stats counters travel as one record of numbers, so a histogram rides along
 * without a message of its own; the server reads it back to render a Prometheus family.
 * @module
 */

/** Per-bucket counts (not cumulative; the last is +Inf) and the sum of the observed values. */
export interface FlatHistogramCounts {
  bucketCounts: number[];
  sum: number;
}

/** Cumulative counts of one histogram, reported as flat counters. */
export class FlatHistogram {
  readonly #counts: number[];
  #sum = 0;

  /** `bounds`: ascending bucket upper bounds (a last bucket, +Inf, is added). */
  constructor(readonly name: string, readonly bounds: readonly number[]) {
    this.#counts = new Array<number>(bounds.length + 1).fill(0);
  }

  /** Counts one value. */
  observe(value: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    this.#counts[i]!++;
    this.#sum += value;
  }

  /** The counts as flat counters, written into `out` (a new record by default). */
  counters(out: Record<string, number> = {}): Record<string, number> {
    out[`${this.name}_sum`] = this.#sum;
    this.#counts.forEach((n, i) => (out[`${this.name}_bucket_${i}`] = n));
    return out;
  }
}

/** Histogram `name` of `bounds` carried by a rank's stats counters, or undefined when it reports none. */
export function flatHistogramOf(
  counters: object,
  name: string,
  bounds: readonly number[],
): FlatHistogramCounts | undefined {
  const c = counters as Record<string, unknown>;
  const sum = c[`${name}_sum`];
  if (typeof sum !== "number") return undefined;
  const bucketCounts = Array.from({ length: bounds.length + 1 }, (_, i) => {
    const n = c[`${name}_bucket_${i}`];
    return typeof n === "number" ? n : 0;
  });
  return { bucketCounts, sum };
}

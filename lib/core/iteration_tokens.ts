/**
 * Tokens per engine step as vLLM's `iteration_tokens_total` histogram counts them: a worker keeps
 * the cumulative counts and reports them among its numeric stats counters, flat (one counter per
 * bucket and one for the sum), and the server reads them back to render the family.
 * @module
 */

/** vLLM's iteration_tokens_total bucket bounds (tokens per engine step); a last bucket is +Inf. */
export const ITERATION_TOKEN_BUCKETS: readonly number[] = [
  1,
  8,
  16,
  32,
  64,
  128,
  256,
  512,
  1024,
  2048,
  4096,
  8192,
  16384,
];

const BUCKET_KEY = "iteration_tokens_bucket_";
const SUM_KEY = "iteration_tokens_sum";

/** Per-bucket step counts (not cumulative; the last is +Inf) and the sum of tokens. */
export interface IterationTokenCounts {
  bucketCounts: number[];
  sum: number;
}

/** The flat stats counters of {@link IterationTokenHistogram.counters}. */
export type IterationTokenCounters = { [key: `iteration_tokens_${string}`]: number };

/** Cumulative tokens-per-step counts of one worker. */
export class IterationTokenHistogram {
  readonly #counts = new Array<number>(ITERATION_TOKEN_BUCKETS.length + 1).fill(0);
  #sum = 0;

  /** Counts one step of `tokens` scheduled tokens. */
  observe(tokens: number): void {
    let i = 0;
    while (i < ITERATION_TOKEN_BUCKETS.length && tokens > ITERATION_TOKEN_BUCKETS[i]!) i++;
    this.#counts[i]!++;
    this.#sum += tokens;
  }

  /** The counts as flat numeric counters. */
  counters(): IterationTokenCounters {
    const out: IterationTokenCounters = { [SUM_KEY]: this.#sum };
    this.#counts.forEach((n, i) => (out[`${BUCKET_KEY}${i}`] = n));
    return out;
  }
}

/** The counts carried by a rank's stats counters, or undefined when it reports none. */
export function iterationTokensOf(counters: object): IterationTokenCounts | undefined {
  const c = counters as Record<string, unknown>;
  if (typeof c[SUM_KEY] !== "number") return undefined;
  const bucketCounts = Array.from({ length: ITERATION_TOKEN_BUCKETS.length + 1 }, (_, i) => {
    const n = c[`${BUCKET_KEY}${i}`];
    return typeof n === "number" ? n : 0;
  });
  return { bucketCounts, sum: c[SUM_KEY] };
}

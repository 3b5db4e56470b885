/**
 * Tokens per engine step as vLLM's `iteration_tokens_total` histogram counts them: a worker keeps
 * the cumulative counts and reports them among its numeric stats counters, flat (one counter per
 * bucket and one for the sum), and the server reads them back to render the family.
 * @module
 */
import { FlatHistogram, type FlatHistogramCounts, flatHistogramOf } from "./flat_histogram.ts";

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

const NAME = "iteration_tokens";

/** Per-bucket step counts (not cumulative; the last is +Inf) and the sum of tokens. */
export type IterationTokenCounts = FlatHistogramCounts;

/** The flat stats counters of {@link IterationTokenHistogram.counters}. */
export type IterationTokenCounters = { [key: `iteration_tokens_${string}`]: number };

/** Cumulative tokens-per-step counts of one worker. */
export class IterationTokenHistogram {
  readonly #h = new FlatHistogram(NAME, ITERATION_TOKEN_BUCKETS);

  /** Counts one step of `tokens` scheduled tokens. */
  observe(tokens: number): void {
    this.#h.observe(tokens);
  }

  /** The counts as flat numeric counters. */
  counters(): IterationTokenCounters {
    return this.#h.counters() as IterationTokenCounters;
  }
}

/** The counts carried by a rank's stats counters, or undefined when it reports none. */
export function iterationTokensOf(counters: object): IterationTokenCounts | undefined {
  return flatHistogramOf(counters, NAME, ITERATION_TOKEN_BUCKETS);
}

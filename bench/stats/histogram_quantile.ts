/**
 * Quantiles of a Prometheus histogram, as PromQL's histogram_quantile reads them: the bucket that
 * holds the q-th observation, interpolated linearly between its bounds (from 0 for the first
 * bucket). The answer is only as fine as the buckets: it lies within the bucket that holds it.
 * @module
 */

/** Cumulative counts of a histogram at increasing upper bounds; the last bound may be +Inf. */
export interface CumulativeBuckets {
  /** Upper bounds (`le`), increasing. */
  bounds: readonly number[];
  /** Observations <= each bound. */
  cumulative: readonly number[];
}

/**
 * The q-quantile (0..1) of the observations; NaN with none. Past the last finite bound it is that
 * bound (the histogram cannot say more), as histogram_quantile answers.
 */
export function histogramQuantile(h: CumulativeBuckets, q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile q must be in [0, 1], got ${q}`);
  if (h.bounds.length !== h.cumulative.length) {
    throw new RangeError(`histogram has ${h.bounds.length} bounds and ${h.cumulative.length} counts`);
  }
  const total = h.cumulative.at(-1) ?? 0;
  if (!(total > 0)) return Number.NaN;
  const rank = q * total;
  let i = 0;
  while (i < h.cumulative.length - 1 && h.cumulative[i]! < rank) i++;
  const upper = h.bounds[i]!;
  if (upper === Infinity) return h.bounds[i - 1] ?? Number.NaN;
  const lower = i === 0 ? 0 : h.bounds[i - 1]!;
  const below = i === 0 ? 0 : h.cumulative[i - 1]!;
  const inBucket = h.cumulative[i]! - below;
  return inBucket > 0 ? lower + (upper - lower) * ((rank - below) / inBucket) : upper;
}

/**
 * Percentiles with linear interpolation between closest ranks: for sorted x[0..n-1] and p in
 * [0, 100], the position is h = (n - 1) * p / 100 and the value x[floor h] + (h - floor h) *
 * (x[floor h + 1] - x[floor h]). This is Hyndman-Fan type 7, the default of NumPy and of vLLM's
 * benchmark output, so our p50/p90/p99 compare with theirs. The control plane's latency stats and
 * the benchmarks (bench/stats/percentile.ts) share it.
 * @module
 */

/** The p-th percentile (0..100) of an ascending-sorted list (no copy, no check); NaN when empty. */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const h = ((sorted.length - 1) * p) / 100;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, sorted.length - 1);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (h - lo) * (b - a);
}

/**
 * Percentiles with linear interpolation between closest ranks: for sorted x[0..n-1] and p in
 * [0, 100], the position is h = (n - 1) * p / 100 and the value x[floor h] + (h - floor h) *
 * (x[floor h + 1] - x[floor h]). This is Hyndman-Fan type 7, the default of NumPy and of vLLM's
 * benchmark output, so our p50/p90/p99 compare with theirs.
 * @module
 */
import { assertFinite } from "./descriptive.ts";

/** The p-th percentile (0..100) of `values`; NaN for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (typeof p !== "number" || !(p >= 0 && p <= 100)) throw new RangeError(`percentile p must be in [0, 100], got ${String(p)}`);
  if (values.length === 0) return Number.NaN;
  assertFinite(values, "values");
  return percentileOfSorted([...values].sort((a, b) => a - b), p);
}

/** Same as percentile() for an already ascending-sorted list (no copy, no check). */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const h = ((sorted.length - 1) * p) / 100;
  const lo = Math.floor(h);
  const hi = Math.min(lo + 1, sorted.length - 1);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (h - lo) * (b - a);
}

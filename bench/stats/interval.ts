/**
 * Two-sided Student-t confidence intervals for the mean of a small sample, e.g. one scalar
 * (throughput, mean TTFT) per complete benchmark repetition.
 * @module
 */
import { mean, stddev } from "./descriptive.ts";
import { studentTQuantile } from "./student_t.ts";

/** A mean with its two-sided confidence interval; `halfWidth` is null with fewer than 2 values. */
export interface ConfidenceInterval {
  n: number;
  mean: number;
  stddev: number | null;
  level: number;
  /** t quantile used (t_{1-(1-level)/2, n-1}); null with fewer than 2 values. */
  t: number | null;
  halfWidth: number | null;
  low: number | null;
  high: number | null;
}

/** mean ± t_{1-α/2, n-1} · s / √n over `values` (default level 0.95). */
export function studentTInterval(values: readonly number[], level = 0.95): ConfidenceInterval {
  if (typeof level !== "number" || !(level > 0 && level < 1)) {
    throw new RangeError(`confidence level must be in (0, 1), got ${String(level)}`);
  }
  if (values.length === 0) throw new RangeError("a confidence interval needs at least one value, got an empty list");
  const n = values.length;
  const m = mean(values);
  if (n < 2) return { n, mean: m, stddev: null, level, t: null, halfWidth: null, low: null, high: null };
  const s = stddev(values);
  const t = studentTQuantile(1 - (1 - level) / 2, n - 1);
  const halfWidth = (t * s) / Math.sqrt(n);
  return { n, mean: m, stddev: s, level, t, halfWidth, low: m - halfWidth, high: m + halfWidth };
}

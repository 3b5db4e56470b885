/**
 * Percentiles of benchmark samples: lib/core/percentile.ts's Hyndman-Fan type 7 (NumPy's and
 * vLLM's default), with the argument checks a benchmark wants.
 * @module
 */
import { percentileOfSorted } from "../../lib/core/percentile.ts";
import { assertFinite } from "./descriptive.ts";

export { percentileOfSorted };

/** The p-th percentile (0..100) of `values`; NaN for an empty list. */
export function percentile(values: readonly number[], p: number): number {
  if (typeof p !== "number" || !(p >= 0 && p <= 100)) {
    throw new RangeError(`percentile p must be in [0, 100], got ${String(p)}`);
  }
  if (values.length === 0) return Number.NaN;
  assertFinite(values, "values");
  return percentileOfSorted([...values].sort((a, b) => a - b), p);
}

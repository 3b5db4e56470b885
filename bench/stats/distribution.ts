/**
 * The summary the benchmarks report for one latency metric: count, mean, stddev, min, max and
 * p50/p90/p99 (type-7 linear interpolation, see percentile.ts).
 * @module
 */
import { assertFinite, mean, stddev } from "./descriptive.ts";
import { percentileOfSorted } from "./percentile.ts";

/** Summary of one sample. NaN fields (empty sample, or stddev of one value) serialize as null. */
export interface Distribution {
  count: number;
  mean: number;
  stddev: number;
  min: number;
  max: number;
  p50: number;
  p90: number;
  p99: number;
}

/** Summarizes `values` (any order). */
export function summarizeDistribution(values: readonly number[]): Distribution {
  assertFinite(values, "values");
  const sorted = [...values].sort((a, b) => a - b);
  return {
    count: sorted.length,
    mean: mean(sorted),
    stddev: stddev(sorted),
    min: sorted.length ? (sorted[0] as number) : Number.NaN,
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
    p50: percentileOfSorted(sorted, 50),
    p90: percentileOfSorted(sorted, 90),
    p99: percentileOfSorted(sorted, 99),
  };
}

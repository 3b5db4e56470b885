// The structured-output mask line of `bun bench serving`: a worker's per-step mask times counted in
// lib/core/mask_time.ts's buckets, rendered by the server's /metrics for two engines, scraped before
// and after, and summarised as steps, exact mean, p99 from the buckets (PromQL's interpolation) and
// the share the forward pass hid.
import { expect, test } from "bun:test";
import { formatMaskTimes, maskHistogramsOf, maskTimeSummary } from "../../../bench/report/mask_time_report.ts";
import { histogramQuantile } from "../../../bench/stats/histogram_quantile.ts";
import type { EngineStats, RankStats } from "../../../lib/core/engine_api.ts";
import { MASK_TIME_BUCKETS, MaskTimeHistogram } from "../../../lib/core/mask_time.ts";
import { ServerMetrics } from "../../../lib/server/metrics.ts";

test("histogram quantiles interpolate within the bucket that holds them, as histogram_quantile does", () => {
  const h = { bounds: [1, 2, 4, Infinity], cumulative: [10, 30, 40, 40] };
  expect(histogramQuantile(h, 0.25)).toBe(1); // the 10th observation: the end of the first bucket
  expect(histogramQuantile(h, 0.5)).toBe(1.5);
  expect(histogramQuantile(h, 0.99)).toBeCloseTo(2 + 2 * (9.6 / 10));
  expect(histogramQuantile({ bounds: [1, Infinity], cumulative: [1, 5] }, 0.9)).toBe(1); // past the last bound
  expect(histogramQuantile({ bounds: [1, Infinity], cumulative: [0, 0] }, 0.5)).toBeNaN();
  expect(() => histogramQuantile(h, 1.5)).toThrow(RangeError);
});

test("the buckets run 1, 1.5, 2, 3, 5, 7 per decade from 10 us to 1 s", () => {
  expect(MASK_TIME_BUCKETS.slice(0, 7)).toEqual([1e-5, 1.5e-5, 2e-5, 3e-5, 5e-5, 7e-5, 1e-4]);
  expect(MASK_TIME_BUCKETS.at(-1)).toBe(1);
  for (let i = 1; i < MASK_TIME_BUCKETS.length; i++) {
    expect(MASK_TIME_BUCKETS[i]! / MASK_TIME_BUCKETS[i - 1]!).toBeLessThanOrEqual(1.67);
  }
});

function stats(ranks: MaskTimeHistogram[]): EngineStats {
  const base = (rank: number): RankStats => ({
    rank,
    numRunning: 0,
    numWaiting: 0,
    numBlocks: 8,
    blockSize: 16,
    numFreeBlocks: 8,
    numReclaimableBlocks: 0,
    kvUsage: 0,
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    numFinished: 0,
    numGeneratedTokens: 0,
  });
  return {
    ranks: ranks.map((h, rank) => ({ ...base(rank), ...h.counters() })),
    routing: {},
    transfers: { count: 0, blocks: 0, bytes: 0 },
    health: { ranks: ranks.map((_, rank) => ({ rank, up: true, restarts: 0 })) },
  };
}

test("per-step mask times go through /metrics and come back as the run's mean, p99 and hidden share", () => {
  const metrics = new ServerMetrics("m");
  const ranks = [new MaskTimeHistogram(), new MaskTimeHistogram()];
  ranks[0]!.observe({ rows: 1, maskMs: 50, hiddenMs: 50 }); // before the run
  const before = maskHistogramsOf(metrics.render(stats(ranks), 0))!;
  expect(before.mask.count).toBe(1);
  // The run: 99 steps of 0.4 ms, all hidden, on two engines, and one of 40 ms of which 10 ms hidden.
  for (let i = 0; i < 99; i++) ranks[i % 2]!.observe({ rows: 2, maskMs: 0.4, hiddenMs: 0.4 });
  ranks[1]!.observe({ rows: 3, maskMs: 40, hiddenMs: 10 });
  const s = maskTimeSummary(before, maskHistogramsOf(metrics.render(stats(ranks), 0))!);
  expect(s.steps).toBe(100);
  expect(s.meanMs).toBeCloseTo((99 * 0.4 + 40) / 100, 6);
  // The 99th of 100 steps lies in the 0.3-0.5 ms bucket.
  expect(s.p99Ms).toBeGreaterThan(0.3);
  expect(s.p99Ms).toBeLessThanOrEqual(0.5);
  expect(s.hiddenShare).toBeCloseTo(1 - 30 / (99 * 0.4 + 40), 6);
  expect(s.exposedMeanMs).toBeCloseTo(0.3, 6);
  const line = formatMaskTimes(s);
  expect(line).toContain("100 steps with constrained requests");
  expect(line).toContain(`hid ${(100 * s.hiddenShare).toFixed(1)}%`);
  expect(formatMaskTimes(null)).toContain("not reported");
  expect(maskHistogramsOf("vllm:num_requests_running 0\n")).toBeNull();
});

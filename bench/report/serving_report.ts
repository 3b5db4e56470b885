/**
 * The serving result in the layout people know from vLLM's benchmark_serving: 40-column labels,
 * 50-column section rules, milliseconds with two decimals, mean / median / P99 per metric.
 * @module
 */
import type { RunMetrics } from "../driver/aggregate.ts";
import type { Distribution } from "../stats/distribution.ts";

// Python's "{:c^50}".format(t): the extra fill character of an odd remainder goes right.
const rule = (t: string, fill: string) => {
  const left = Math.floor((50 - t.length) / 2);
  return `${fill.repeat(Math.max(0, left))}${t}${fill.repeat(Math.max(0, 50 - t.length - left))}`;
};
const row = (label: string, value: string) => `${label.padEnd(40)} ${value.padEnd(10)}`;
const num = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : "nan");

function section(title: string, short: string, d: Distribution): string[] {
  return [
    rule(title, "-"),
    row(`Mean ${short} (ms):`, num(d.mean)),
    row(`Median ${short} (ms):`, num(d.p50)),
    row(`P99 ${short} (ms):`, num(d.p99)),
  ];
}

/** Renders the result block; `maxConcurrency`/`requestRate` are printed when set. */
export function formatServingResult(
  m: RunMetrics,
  options: { maxConcurrency?: number; requestRate?: number } = {},
): string {
  return [
    rule(" Serving Benchmark Result ", "="),
    row("Successful requests:", String(m.completed)),
    ...(m.failed > 0 ? [row("Failed requests:", String(m.failed))] : []),
    ...(options.maxConcurrency !== undefined
      ? [row("Maximum request concurrency:", String(options.maxConcurrency))]
      : []),
    ...(options.requestRate !== undefined ? [row("Request rate configured (RPS):", num(options.requestRate))] : []),
    row("Benchmark duration (s):", num(m.elapsedS)),
    row("Total input tokens:", String(m.promptTokens)),
    row("Total generated tokens:", String(m.outputTokens)),
    row("Request throughput (req/s):", num(m.requestThroughput)),
    row("Output token throughput (tok/s):", num(m.outputThroughput)),
    row("Total Token throughput (tok/s):", num(m.totalTokenThroughput)),
    ...section("Time to First Token", "TTFT", m.ttftMs),
    ...section("Time per Output Token (excl. 1st token)", "TPOT", m.tpotMs),
    ...section("Inter-token Latency", "ITL", m.itlMs),
    ...section("End-to-end Latency", "E2EL", m.e2eMs),
    "=".repeat(50),
  ].join("\n");
}

/**
 * The charts of a results set: throughput, mean TTFT and mean TPOT as grouped bars (scenarios
 * on the x axis, one bar per configuration, 95% interval whiskers), and transfer latency against
 * payload size per GPU pair when transfer measurements exist.
 * @module
 */
import { groupedBarChart } from "./bar_chart.ts";
import { lineChart } from "./line_chart.ts";
import type { BenchResults } from "./schema.ts";

function metricChart(r: BenchResults, key: string, title: string, yLabel: string): string {
  const categories = r.scenarios.map((s) => s.workload.name);
  const names = [...new Set(r.scenarios.flatMap((s) => s.configurations.map((c) => c.name)))];
  const series = names.map((name) => {
    const found = r.scenarios.map((s) =>
      s.configurations.find((c) => c.name === name && c.status === "ok")?.intervals[key]
    );
    return {
      name,
      values: found.map((ci) => (ci && Number.isFinite(ci.mean) ? ci.mean : null)),
      errors: found.map((ci) => ci?.halfWidth ?? null),
    };
  });
  return groupedBarChart({ title, yLabel, categories, series });
}

/** File name -> SVG text for every chart the results support. */
export function renderCharts(r: BenchResults): Record<string, string> {
  const charts: Record<string, string> = {
    "throughput.svg": metricChart(r, "outputThroughput", "Output throughput (95% CI)", "output tokens / s"),
    "ttft.svg": metricChart(r, "ttftMean", "Mean time to first token (95% CI)", "TTFT (ms)"),
    "tpot.svg": metricChart(r, "tpotMean", "Mean time per output token (95% CI)", "TPOT (ms)"),
  };
  const points = r.transferLatency ?? [];
  if (points.length > 0) {
    const pairs = [...new Set(points.map((p) => p.pair))];
    charts["transfer_latency.svg"] = lineChart({
      title: "KV transfer latency vs size",
      xLabel: "blocks per transfer",
      yLabel: "latency (ms)",
      logX: true,
      series: pairs.map((pair) => ({
        name: pair,
        points: points.filter((p) => p.pair === pair).map((p) => ({ x: p.blocks, y: p.latencyMs })),
      })),
    });
  }
  return charts;
}

/**
 * The simulator's scale report: one row per workload, GPU count and configuration (output
 * throughput, mean and p99 TTFT, token reuse, each a mean over seeds with its 95% half-width), and
 * per workload two SVG line charts against the number of GPUs, one line per configuration:
 * throughput and mean TTFT.
 * @module
 */
import type { ConfigurationResult } from "../driver/repetitions.ts";
import { lineChart } from "../report/line_chart.ts";
import { formatInterval, markdownTable } from "../report/summary_md.ts";

/** One configuration's result on one workload at one GPU count. */
export interface ScalePoint {
  workload: string;
  gpus: number;
  /** What drove the load at this size (e.g. "speedup 48" or "numRequests 1536"). */
  load: string;
  result: ConfigurationResult;
}

/** The scale table, in markdown. */
export function scaleTable(points: readonly ScalePoint[]): string {
  const rows = points.map((p) => [
    p.workload,
    String(p.gpus),
    p.load,
    p.result.name,
    formatInterval(p.result.intervals.outputThroughput, 0),
    formatInterval(p.result.intervals.ttftMean, 1),
    formatInterval(p.result.intervals.ttftP99, 1),
    formatInterval(p.result.intervals.tokenReuse, 1, 100),
  ]);
  return markdownTable(
    ["workload", "GPUs", "load", "configuration", "output tok/s", "mean TTFT ms", "p99 TTFT ms", "token reuse %"],
    rows,
  );
}

/** Per workload: `scale-<workload>-throughput.svg` and `scale-<workload>-ttft.svg`. */
export function scaleCharts(points: readonly ScalePoint[]): Record<string, string> {
  const out: Record<string, string> = {};
  const workloads = [...new Set(points.map((p) => p.workload))];
  for (const w of workloads) {
    const mine = points.filter((p) => p.workload === w);
    const configs = [...new Set(mine.map((p) => p.result.name))];
    const series = (key: "outputThroughput" | "ttftMean") =>
      configs.map((name) => ({
        name,
        points: mine
          .filter((p) => p.result.name === name && p.result.intervals[key] !== undefined)
          .map((p) => ({ x: p.gpus, y: p.result.intervals[key]!.mean })),
      })).filter((s) => s.points.length > 0);
    const slug = w.replace(/[^A-Za-z0-9._-]+/g, "_");
    const tp = series("outputThroughput");
    if (tp.length > 0) {
      out[`scale-${slug}-throughput.svg`] = lineChart({
        title: `${w}: output throughput vs GPUs (simulated)`,
        xLabel: "GPUs",
        yLabel: "output tok/s",
        series: tp,
        logX: true,
      });
    }
    const ttft = series("ttftMean");
    if (ttft.length > 0) {
      out[`scale-${slug}-ttft.svg`] = lineChart({
        title: `${w}: mean TTFT vs GPUs (simulated)`,
        xLabel: "GPUs",
        yLabel: "mean TTFT ms",
        series: ttft,
        logX: true,
      });
    }
  }
  return out;
}

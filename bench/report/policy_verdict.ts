/**
 * Whether one configuration is the best policy on one result row: its output throughput at least
 * `throughputRatio` times the best other configuration's, its mean and p99 TTFT at most
 * `ttftRatio` times the best other's, and optionally its throughput at least `overBaseline` times a
 * baseline configuration's. "Tied" (within the other's 95% half-width of the other's mean) is
 * reported beside the ratios, so a reader sees both views.
 * @module
 */
import type { ConfidenceInterval } from "../stats/interval.ts";

/** One configuration's intervals on one row (a scenario, or one rung of a ladder). */
export interface RowEntry {
  configuration: string;
  intervals: Readonly<Record<string, ConfidenceInterval>>;
}

/** The bars a candidate must clear. */
export interface VerdictBars {
  /** Its throughput over the best other's, at least (e.g. 0.98). */
  throughputRatio: number;
  /** Its mean and p99 TTFT over the best other's, at most (e.g. 1.05). */
  ttftRatio: number;
  /** A baseline its throughput must exceed by this factor (e.g. round-robin, 2), if any. */
  overBaseline?: { configuration: string; factor: number };
}

/** How the candidate fares on one metric. */
export interface MetricVerdict {
  metric: "outputThroughput" | "ttftMean" | "ttftP99";
  candidate: number;
  bestOther: number;
  bestOtherName: string;
  /** candidate / bestOther. */
  ratio: number;
  /** The candidate's mean is within the best other's half-width of its mean, or better. */
  tied: boolean;
  pass: boolean;
}

/** The candidate's verdict on one row. */
export interface RowVerdict {
  row: string;
  metrics: MetricVerdict[];
  /** Throughput over the baseline's, when a baseline is set. */
  overBaseline?: { ratio: number; pass: boolean };
  pass: boolean;
}

const HIGHER_IS_BETTER = { outputThroughput: true, ttftMean: false, ttftP99: false } as const;

/** Judges `candidate` against every other entry of one row. */
export function judgeRow(row: string, entries: readonly RowEntry[], candidate: string, bars: VerdictBars): RowVerdict {
  const mine = entries.find((e) => e.configuration === candidate);
  if (!mine) throw new RangeError(`row ${row}: no results for ${candidate}`);
  const others = entries.filter((e) => e.configuration !== candidate);
  if (others.length === 0) throw new RangeError(`row ${row}: nothing to compare ${candidate} with`);
  const metrics = (Object.keys(HIGHER_IS_BETTER) as MetricVerdict["metric"][]).flatMap((metric) => {
    const c = mine.intervals[metric];
    if (!c) return [];
    const higher = HIGHER_IS_BETTER[metric];
    let best: RowEntry | undefined;
    for (const o of others) {
      const v = o.intervals[metric]?.mean;
      if (v === undefined || !Number.isFinite(v)) continue;
      const b = best?.intervals[metric]?.mean;
      if (b === undefined || (higher ? v > b : v < b)) best = o;
    }
    if (!best) return [];
    const bi = best.intervals[metric]!;
    const ratio = c.mean / bi.mean;
    const hw = bi.halfWidth ?? 0; // one seed: no interval, tied only when equal
    const tied = higher ? c.mean >= bi.mean - hw : c.mean <= bi.mean + hw;
    const pass = higher ? ratio >= bars.throughputRatio : ratio <= bars.ttftRatio;
    return [{ metric, candidate: c.mean, bestOther: bi.mean, bestOtherName: best.configuration, ratio, tied, pass }];
  });
  let overBaseline: RowVerdict["overBaseline"];
  if (bars.overBaseline) {
    const base = entries.find((e) => e.configuration === bars.overBaseline!.configuration);
    const b = base?.intervals.outputThroughput?.mean;
    const c = mine.intervals.outputThroughput?.mean;
    // A baseline or candidate without results cannot show the margin: it fails.
    const ratio = b !== undefined && c !== undefined ? c / b : NaN;
    overBaseline = { ratio, pass: ratio >= bars.overBaseline.factor };
  }
  // A metric the candidate did not produce (a failed run) is a miss, never a pass by omission.
  const pass = metrics.length === Object.keys(HIGHER_IS_BETTER).length && metrics.every((m) => m.pass) &&
    (overBaseline?.pass ?? true);
  return { row, metrics, ...(overBaseline ? { overBaseline } : {}), pass };
}

const METRIC_LABEL = { outputThroughput: "tok/s", ttftMean: "mean TTFT", ttftP99: "p99 TTFT" } as const;

/** A markdown table of verdicts: one line per row, each metric as "ratio (best other)". */
export function verdictTable(verdicts: readonly RowVerdict[], candidate: string): string {
  const head = ["row", ...Object.values(METRIC_LABEL).map((l) => `${candidate} ${l} / best other`), "vs baseline", ""];
  const lines = verdicts.map((v) => {
    const cells = (Object.keys(METRIC_LABEL) as MetricVerdict["metric"][]).map((k) => {
      const m = v.metrics.find((x) => x.metric === k);
      if (!m) return "-";
      return `${m.ratio.toFixed(3)}${m.pass ? "" : " ✗"} (${m.candidate.toFixed(1)} vs ${
        m.bestOther.toFixed(1)
      } ${m.bestOtherName}${m.tied ? ", tied" : ""})`;
    });
    const base = v.overBaseline ? `${v.overBaseline.ratio.toFixed(2)}x${v.overBaseline.pass ? "" : " ✗"}` : "-";
    return `| ${[v.row, ...cells, base, v.pass ? "ok" : "**miss**"].join(" | ")} |`;
  });
  return [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`, ...lines].join("\n");
}

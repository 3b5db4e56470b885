/**
 * The serving benchmark's report of a run with request extras: per group (the requests without the
 * extra, and those with it) the request count, mean and p99 TPOT and mean TTFT, then how the
 * extra's outputs ended and whether they were what was asked for, and for structured outputs the
 * server's per-step mask time (mask_time_report.ts).
 * @module
 */
import type { RunMetrics } from "../driver/aggregate.ts";

/** How the outputs of the requests with the extra came out. */
export interface ExtrasOutcome {
  kind: string;
  /** Requests with the extra that finished (with a finish reason). */
  finished: number;
  /** Of those, ended by the length limit. */
  lengthFinishes: number;
  /** Whether outputs are checked at all (structured outputs are; logprobs are not). */
  checked: boolean;
  /** Outputs that fail their check, and the first problem found. */
  invalid: number;
  firstProblem?: string;
}

/** The group table and the outcome line, as markdown; `masksLine` (structured outputs) ends it. */
export function formatExtrasReport(
  metrics: RunMetrics,
  outcome: ExtrasOutcome,
  plainPhase: string,
  masksLine?: string,
): string {
  const rows = [plainPhase, outcome.kind].map((phase) => {
    const p = metrics.phases[phase];
    if (!p) return `| ${phase} | 0 | - | - | - |`;
    return `| ${phase} | ${p.requests} | ${p.tpotMs.mean.toFixed(2)} | ${p.tpotMs.p99.toFixed(2)} | ${
      p.ttftMs.mean.toFixed(1)
    } |`;
  });
  const problem = outcome.firstProblem ? ` (first: ${outcome.firstProblem})` : "";
  return [
    "| requests | n | mean TPOT ms | p99 TPOT ms | mean TTFT ms |",
    "|---|---|---|---|---|",
    ...rows,
    "",
    `${outcome.kind}: ${outcome.finished} finished, ${outcome.lengthFinishes} by the length limit, ` +
    (outcome.checked ? `${outcome.invalid} outputs not what was asked for${problem}` : "outputs not checked"),
    ...(masksLine ? [masksLine] : []),
  ].join("\n");
}

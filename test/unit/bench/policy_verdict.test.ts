// judgeRow: lmpool against the best other configuration on one row, and what a failed run counts as.
import { expect, test } from "bun:test";
import { judgeRow, type RowEntry, verdictTable } from "../../../bench/report/policy_verdict.ts";
import { studentTInterval } from "../../../bench/stats/interval.ts";

const entry = (configuration: string, tput: number[], ttft: number[], p99: number[]): RowEntry => ({
  configuration,
  intervals: {
    outputThroughput: studentTInterval(tput),
    ttftMean: studentTInterval(ttft),
    ttftP99: studentTInterval(p99),
  },
});
const BARS = { throughputRatio: 0.98, ttftRatio: 1.05 };

test("ratios against the best other per metric; a miss on one metric misses the row; ties use the other's half-width", () => {
  const rows = [
    entry("round-robin", [100, 102, 98], [50, 52, 48], [200, 210, 190]),
    entry("cache-aware", [200, 210, 190], [30, 31, 29], [150, 160, 140]),
    entry("lmpool", [199, 200, 201], [31, 31, 31], [150, 150, 150]),
  ];
  const v = judgeRow("locality 5x", rows, "lmpool", {
    ...BARS,
    overBaseline: { configuration: "round-robin", factor: 2 },
  });
  expect(v.metrics.map((m) => [m.metric, m.bestOtherName, m.pass, m.tied])).toEqual([
    ["outputThroughput", "cache-aware", true, true],
    ["ttftMean", "cache-aware", true, true],
    ["ttftP99", "cache-aware", true, true],
  ]);
  expect(v.overBaseline).toEqual({ ratio: 2, pass: true });
  expect(v.pass).toBe(true);
  const slow = judgeRow(
    "x",
    [rows[1]!, entry("lmpool", [150, 150, 150], [31, 31, 31], [150, 150, 150])],
    "lmpool",
    BARS,
  );
  expect(slow.pass).toBe(false);
  expect(verdictTable([v, slow], "lmpool")).toContain("**miss**");
});

test("a candidate or baseline without results misses the row instead of passing by omission", () => {
  const others = [entry("round-robin", [100, 100, 100], [50, 50, 50], [200, 200, 200])];
  const failed = judgeRow("x", [...others, { configuration: "lmpool", intervals: {} }], "lmpool", BARS);
  expect(failed.metrics).toEqual([]);
  expect(failed.pass).toBe(false);
  const good = entry("lmpool", [300, 300, 300], [10, 10, 10], [100, 100, 100]);
  const noBase = judgeRow("x", [others[0]!, good], "lmpool", {
    ...BARS,
    overBaseline: { configuration: "least-loaded", factor: 2 },
  });
  expect(noBase.overBaseline!.pass).toBe(false);
  expect(noBase.pass).toBe(false);
  expect(() => judgeRow("x", others, "lmpool", BARS)).toThrow("no results for lmpool");
});

// Per-rung results of a ladder: each phase's own achieved throughput, rows per configuration and rung
// with intervals over repetitions, the summary's per-rung table, and a ladder run through the
// scheduler (rungs drain before the next one starts; within a rung, requests go at their due times).
import { describe, expect, test } from "bun:test";
import { aggregateRun, type RunMetrics } from "../../../bench/driver/aggregate.ts";
import { arrivalOffsetsMs } from "../../../bench/driver/arrival.ts";
import { workloadArrival } from "../../../bench/driver/ladder_arrival.ts";
import type { ConfigurationResult } from "../../../bench/driver/repetitions.ts";
import { type RequestObservation, toRecord } from "../../../bench/driver/request_record.ts";
import { runSchedule } from "../../../bench/driver/schedule.ts";
import { rungRows } from "../../../bench/report/rung_table.ts";
import type { ScenarioResult } from "../../../bench/report/schema.ts";
import { rungTable, scenarioSection } from "../../../bench/report/summary_md.ts";
import { sharedPrefixLadderWorkload } from "../../../bench/workloads/shared_prefix_ladder.ts";

/** A request of `phase` sent at `sentMs`, first token after 10 ms, `tokens` tokens, finished at `finishMs`. */
const record = (phase: string, sentMs: number, finishMs: number, tokens: number, cached: number) =>
  toRecord({
    id: `${phase}-${sentMs}`,
    phase,
    promptTokens: 100,
    dueMs: sentMs,
    sentMs,
    tokenDeltas: [{ atMs: sentMs + 10, tokens: 1 }, { atMs: finishMs, tokens: tokens - 1 }],
    finishMs,
    cachedTokens: cached,
    rank: 0,
    finishReason: "length",
  });

/** One repetition: rung A of two requests over 1 s, rung B of four requests over 0.5 s; `slow` stretches B's TTFT. */
function repetition(slow: number): RunMetrics {
  return aggregateRun({
    startedAtEpochMs: 0,
    elapsedMs: 2000,
    statsBefore: null,
    statsAfter: null,
    records: [
      record("A", 0, 500, 5, 0),
      record("A", 400, 1000, 5, 64),
      ...[0, 1, 2, 3].map((i) => record("B", 1000 + i * 100 + slow, 1500, 3, 64)),
    ],
  });
}

describe("per-phase throughput", () => {
  test("each phase counts its requests and tokens over its own span, first sent to last finished", () => {
    const m = repetition(0);
    expect(m.phases.A).toMatchObject({ requests: 2, elapsedS: 1, outputTokens: 10, requestThroughput: 2 });
    expect(m.phases.A!.outputThroughput).toBeCloseTo(10, 12);
    expect(m.phases.B).toMatchObject({ requests: 4, elapsedS: 0.5, outputTokens: 12 });
    expect(m.phases.B!.requestThroughput).toBeCloseTo(8, 12);
    expect(m.phases.B!.outputThroughput).toBeCloseTo(24, 12);
    expect(m.phases.A!.prefixHitRate).toBe(0.5);
  });
});

describe("rung rows", () => {
  const config: ConfigurationResult = {
    name: "round-robin",
    description: "rr",
    status: "ok",
    repetitions: [
      { index: 0, complete: true, metrics: repetition(0) },
      { index: 1, complete: true, metrics: repetition(50) },
      { index: 2, complete: false, metrics: null, error: "boom" },
    ],
    completeRepetitions: 2,
    intervals: {},
  };
  const rungs = [{ phase: "A", rate: 2, requests: 2 }, { phase: "B", rate: 8, requests: 4 }];

  test("one row per rung, intervals over the complete repetitions only", () => {
    const rows = rungRows(config, rungs);
    expect(rows.map((r) => [r.configuration, r.phase, r.rate, r.requests, r.repetitions])).toEqual([
      ["round-robin", "A", 2, 2, 2],
      ["round-robin", "B", 8, 4, 2],
    ]);
    expect(rows[0]!.intervals.requestThroughput).toMatchObject({ n: 2, mean: 2, halfWidth: 0 });
    expect(rows[0]!.intervals.completed!.mean).toBe(2);
    // B's span shrinks from 0.5 s to 0.45 s in the second repetition: two different rates, a real interval.
    expect(rows[1]!.intervals.requestThroughput!.mean).toBeCloseTo((8 + 4 / 0.45) / 2, 9);
    expect(rows[1]!.intervals.requestThroughput!.halfWidth).toBeGreaterThan(0);
    expect(rows[1]!.intervals.prefixHitRate!.mean).toBe(1);
    expect(Object.keys(rows[1]!.intervals).sort()).toEqual(
      [
        "completed",
        "outputThroughput",
        "prefixHitRate",
        "requestThroughput",
        "tokenReuse",
        "tpotMean",
        "ttftMean",
        "ttftP99",
      ],
    );
  });

  test("a rung no repetition ran has a row without intervals; a one-rung ladder reads the whole run", () => {
    const rows = rungRows(config, [...rungs, { phase: "C", rate: 16, requests: 1 }]);
    expect(rows[2]).toMatchObject({ phase: "C", repetitions: 0, intervals: {} });
    const single = rungRows(
      { ...config, repetitions: [{ index: 0, complete: true, metrics: repetition(0) }] },
      [{ phase: "all", rate: 3, requests: 6 }],
    );
    expect(single[0]!.intervals.completed!.mean).toBe(6);
  });

  test("summary.md carries one row per configuration and rung under the scenario's table", () => {
    const rows = rungRows(config, rungs);
    const table = rungTable(rows);
    expect(table.split("\n")).toHaveLength(4);
    expect(table).toContain("| round-robin | B | 8 | 4 | 2 | 8.44 ± ");
    const scenario: ScenarioResult = {
      workload: { name: "w", description: "d", seed: 0, params: {}, settings: {}, requests: 6 },
      traceProfile: null,
      arrival: "ladder 2, 8 req/s",
      maxInFlight: null,
      configurations: [config],
      ladder: { rungs, rows },
    };
    const md = scenarioSection(scenario);
    expect(md).toContain("arrival ladder 2, 8 req/s");
    expect(md).toContain("Per rung");
    expect(md).toContain(table);
    expect(scenarioSection({ ...scenario, ladder: undefined } as ScenarioResult)).not.toContain("Per rung");
  });
});

describe("a ladder through the scheduler", () => {
  test("rungs drain before the next starts; within a rung requests go at their due times", async () => {
    const w = sharedPrefixLadderWorkload({
      groups: 2,
      users: 2,
      systemTokens: 8,
      questionTokens: 2,
      outputTokens: 2,
      rates: [200, 400],
      requestsPerRung: 4,
    });
    const { workload, arrival } = workloadArrival(w, undefined, { kind: "burst" }, 1);
    const due = arrivalOffsetsMs(workload.requests, arrival);
    const run = await runSchedule(workload, { arrival }, async (r, now, dueMs): Promise<RequestObservation> => {
      const sentMs = now();
      await new Promise((res) => setTimeout(res, 15));
      return {
        id: r.id,
        ...(r.phase !== undefined ? { phase: r.phase } : {}),
        promptTokens: r.promptTokenIds!.length,
        dueMs,
        sentMs,
        tokenDeltas: [{ atMs: now(), tokens: 2 }],
        finishMs: now(),
        cachedTokens: 0,
        rank: 0,
        finishReason: "length",
      };
    });
    const phases = [...new Set(run.records.map((r) => r.phase))];
    expect(phases).toEqual(["warmup", "rung 1 @ 200 req/s", "rung 2 @ 400 req/s"]);
    for (let k = 1; k < phases.length; k++) {
      const previous = run.records.filter((r) => r.phase === phases[k - 1]);
      const current = run.records.filter((r) => r.phase === phases[k]);
      const drained = Math.max(...previous.map((r) => r.finishMs));
      expect(Math.min(...current.map((r) => r.sentMs))).toBeGreaterThanOrEqual(drained);
      // Within the rung, the gaps between due times are the ladder's.
      const first = workload.requests.findIndex((r) => r.phase === phases[k]);
      current.forEach((r, i) => expect(r.dueMs - current[0]!.dueMs).toBeCloseTo(due[first + i]! - due[first]!, 6));
    }
  });
});

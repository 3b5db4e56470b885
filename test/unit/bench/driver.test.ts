// The driver: arrival schedules, the scheduler's limits and orders, per-request derivation and
// run aggregation, checked on hand-made observations.
import { describe, expect, test } from "bun:test";
import { aggregateRun, scalarMetrics } from "../../../bench/driver/aggregate.ts";
import { arrivalOffsetsMs, parseArrival } from "../../../bench/driver/arrival.ts";
import { ConfigurationUnavailableError } from "../../../bench/driver/configuration.ts";
import { runConfiguration } from "../../../bench/driver/repetitions.ts";
import { type RequestObservation, toRecord } from "../../../bench/driver/request_record.ts";
import { runSchedule } from "../../../bench/driver/schedule.ts";
import { mean } from "../../../bench/stats/descriptive.ts";
import type { Workload, WorkloadRequest } from "../../../bench/workloads/types.ts";

const req = (id: string, extra: Partial<WorkloadRequest> = {}): WorkloadRequest => ({
  id,
  promptTokenIds: [1, 2, 3],
  maxTokens: 2,
  ...extra,
});
const workload = (requests: WorkloadRequest[], settings: Workload["settings"] = {}): Workload => ({
  name: "t",
  description: "t",
  seed: 0,
  params: {},
  settings,
  requests,
});
const observation = (o: Partial<RequestObservation>): RequestObservation => ({
  id: "r",
  promptTokens: 10,
  dueMs: 0,
  sentMs: 0,
  tokenDeltas: [],
  finishMs: 0,
  cachedTokens: 0,
  rank: 0,
  finishReason: "length",
  ...o,
});

describe("arrival", () => {
  const reqs = Array.from({ length: 2000 }, (_, i) => req(`r${i}`));
  test("burst sends everything at 0", () => {
    expect(new Set(arrivalOffsetsMs(reqs.slice(0, 5), { kind: "burst" }))).toEqual(new Set([0]));
  });
  test("Poisson gaps are seeded, start at 0 and average 1/rate", () => {
    const a = arrivalOffsetsMs(reqs, { kind: "poisson", rate: 50, seed: 1 });
    expect(a).toEqual(arrivalOffsetsMs(reqs, { kind: "poisson", rate: 50, seed: 1 }));
    expect(a).not.toEqual(arrivalOffsetsMs(reqs, { kind: "poisson", rate: 50, seed: 2 }));
    expect(a[0]).toBe(0);
    const gaps = a.slice(1).map((t, i) => t - a[i]!);
    expect(gaps.every((g) => g >= 0)).toBe(true);
    expect(mean(gaps)).toBeGreaterThan(20 * 0.9);
    expect(mean(gaps)).toBeLessThan(20 * 1.1);
  });
  test("trace mode uses arrival_time and names a request without one", () => {
    expect(arrivalOffsetsMs([req("a", { arrivalTime: 0.25 }), req("b", { arrivalTime: 1 })], { kind: "trace" }))
      .toEqual([250, 1000]);
    expect(() => arrivalOffsetsMs([req("a", { arrivalTime: 0 }), req("b")], { kind: "trace" })).toThrow(/b has none/);
  });
  test("parsing", () => {
    expect(parseArrival("inf", 0)).toEqual({ kind: "burst" });
    expect(parseArrival("2.5", 9)).toEqual({ kind: "poisson", rate: 2.5, seed: 9 });
    expect(() => parseArrival("fast", 0)).toThrow(/"fast"/);
  });
});

describe("request record", () => {
  test("TTFT, TPOT over N - 1, ITL per delta, E2E", () => {
    const r = toRecord(
      observation({
        sentMs: 100,
        tokenDeltas: [{ atMs: 150, tokens: 1 }, { atMs: 170, tokens: 2 }, { atMs: 200, tokens: 1 }],
        finishMs: 210,
      }),
    );
    expect(r.outputTokens).toBe(4);
    expect(r.ttftMs).toBe(50);
    expect(r.tpotMs).toBeCloseTo((210 - 150) / 3, 12);
    expect(r.itlMs).toEqual([20, 30]);
    expect(r.e2eMs).toBe(110);
  });
  test("a single output token has no TPOT", () => {
    expect(toRecord(observation({ tokenDeltas: [{ atMs: 5, tokens: 1 }], finishMs: 6 })).tpotMs).toBeNull();
  });
  test("a server-reported token count overrides the delta count", () => {
    const r = toRecord(
      observation({
        tokenDeltas: [{ atMs: 10, tokens: 1 }, { atMs: 20, tokens: 1 }],
        finishMs: 40,
        reportedOutputTokens: 4,
      }),
    );
    expect(r.outputTokens).toBe(4);
    expect(r.tpotMs).toBe(10);
  });
});

// A send function that "serves" each request after `ms` and logs start/end order.
function timedSend(ms: (r: WorkloadRequest) => number, events: string[], live = { now: 0, max: 0 }) {
  return async (r: WorkloadRequest, now: () => number, dueMs: number): Promise<RequestObservation> => {
    const sentMs = now();
    events.push(`start ${r.id}`);
    live.now++;
    live.max = Math.max(live.max, live.now);
    await new Promise((res) => setTimeout(res, ms(r)));
    live.now--;
    events.push(`end ${r.id}`);
    return observation({
      id: r.id,
      sentMs,
      dueMs,
      tokenDeltas: [{ atMs: now(), tokens: 1 }],
      finishMs: now(),
      ...(r.phase ? { phase: r.phase } : {}),
    });
  };
}

describe("scheduler", () => {
  test("never exceeds the in-flight limit and returns records in workload order", async () => {
    const live = { now: 0, max: 0 };
    const w = workload(Array.from({ length: 9 }, (_, i) => req(`r${i}`)), { maxInFlight: 3 });
    const run = await runSchedule(w, {}, timedSend((r) => (r.id === "r0" ? 30 : 5), [], live));
    expect(live.max).toBe(3);
    expect(run.records.map((r) => r.id)).toEqual(w.requests.map((r) => r.id));
    expect(run.elapsedMs).toBeGreaterThanOrEqual(25);
  });
  test("a session's turns run one after another; other sessions overlap", async () => {
    const events: string[] = [];
    const w = workload([
      req("a1", { sessionId: "a" }),
      req("b1", { sessionId: "b" }),
      req("a2", { sessionId: "a" }),
      req("b2", { sessionId: "b" }),
    ]);
    await runSchedule(w, {}, timedSend(() => 10, events));
    expect(events.indexOf("start a2")).toBeGreaterThan(events.indexOf("end a1"));
    expect(events.indexOf("start b2")).toBeGreaterThan(events.indexOf("end b1"));
    expect(events.indexOf("start b1")).toBeLessThan(events.indexOf("end a1"));
  });
  test("phase barriers open a phase only after the previous one drained", async () => {
    const events: string[] = [];
    const w = workload(
      [req("w1", { phase: "warmup" }), req("w2", { phase: "warmup" }), req("u1", { phase: "reuse" })],
      { phaseBarrier: true },
    );
    await runSchedule(w, {}, timedSend((r) => (r.id === "w2" ? 25 : 5), events));
    expect(events.indexOf("start u1")).toBeGreaterThan(events.indexOf("end w2"));
    const loose: string[] = [];
    await runSchedule(w, { phaseBarrier: false }, timedSend((r) => (r.id === "w2" ? 25 : 5), loose));
    expect(loose.indexOf("start u1")).toBeLessThan(loose.indexOf("end w2"));
  });
  test("Poisson arrivals delay requests to their due times", async () => {
    const w = workload(Array.from({ length: 4 }, (_, i) => req(`r${i}`)));
    const run = await runSchedule(w, { arrival: { kind: "poisson", rate: 100, seed: 3 } }, timedSend(() => 1, []));
    const due = arrivalOffsetsMs(w.requests, { kind: "poisson", rate: 100, seed: 3 });
    run.records.forEach((r, i) => expect(r.sentMs).toBeGreaterThanOrEqual(due[i]! - 1));
  });
});

describe("aggregation", () => {
  test("throughput, hit rate, token reuse, per-rank load, transfers and phases", () => {
    const records = [
      toRecord(
        observation({
          id: "a",
          promptTokens: 100,
          cachedTokens: 0,
          rank: 0,
          sentMs: 0,
          tokenDeltas: [{ atMs: 100, tokens: 1 }, { atMs: 200, tokens: 1 }],
          finishMs: 200,
          phase: "warmup",
        }),
      ),
      toRecord(
        observation({
          id: "b",
          promptTokens: 100,
          cachedTokens: 64,
          rank: 1,
          sentMs: 0,
          tokenDeltas: [{ atMs: 50, tokens: 2 }],
          finishMs: 60,
          phase: "reuse",
        }),
      ),
      toRecord(
        observation({
          id: "c",
          promptTokens: 50,
          cachedTokens: 32,
          rank: 1,
          sentMs: 100,
          tokenDeltas: [{ atMs: 150, tokens: 1 }, { atMs: 500, tokens: 1 }],
          finishMs: 500,
          phase: "reuse",
        }),
      ),
      toRecord(
        observation({ id: "d", promptTokens: 10, sentMs: 0, finishMs: 5, finishReason: "error", error: "boom" }),
      ),
    ];
    const stats = (count: number, blocks: number, p50: number) => ({
      ranks: [],
      routing: {
        hits: count,
        "transfer_prefix-copy_completed": count - 1,
        transfer_offload_completed: 1,
        transfer_released_blocks: blocks - 4,
        transfer_publish_samples: count,
        transfer_publish_ms_p50: p50,
        transfer_publish_ms_p95: 2 * p50,
        transfer_publish_ms_max: 3 * p50,
      },
      transfers: { count, blocks, bytes: blocks * 1000 },
      health: { ranks: [] },
    });
    const m = aggregateRun({
      startedAtEpochMs: 0,
      elapsedMs: 500,
      records,
      statsBefore: stats(1, 4, 0.5),
      statsAfter: stats(3, 10, 0.25),
    });
    expect(m.completed).toBe(3);
    expect(m.failed).toBe(1);
    expect(m.errors).toEqual(["boom"]);
    expect(m.outputTokens).toBe(6);
    expect(m.outputThroughput).toBeCloseTo(12, 12);
    expect(m.requestThroughput).toBeCloseTo(6, 12);
    expect(m.totalTokenThroughput).toBeCloseTo((250 + 6) / 0.5, 12);
    expect(m.prefixHitRate).toBeCloseTo(2 / 3, 12);
    expect(m.tokenReuse).toBeCloseTo(96 / 250, 12);
    expect(m.ttftMs.mean).toBeCloseTo((100 + 50 + 50) / 3, 12);
    expect(m.tpotMs.count).toBe(3);
    expect(m.perRankRequests).toEqual({ "0": 1, "1": 2 });
    expect(m.transfers).toEqual({ count: 2, blocks: 6, bytes: 6000 });
    expect(m.routing).toMatchObject({ hits: 2, transfer_publish_ms_p50: 0.25 }); // a gauge: the value after, not a difference
    expect(m.transferPlans).toEqual({
      completed: { prefixCopy: 2, offload: 0, background: 0 },
      aborted: 0,
      releasedBlocks: 6,
      leaseRoutes: 0,
      publishMs: { samples: 3, p50: 0.25, p95: 0.5, max: 0.75 },
      publish1BlockMs: null,
    });
    expect(scalarMetrics(m)).toMatchObject({
      transferPrefixCopies: 2,
      transferReleasedBlocks: 6,
      transferPublishP50: 0.25,
      transferPublishP95: 0.5,
    });
    expect(scalarMetrics(m).transferPublish1BlockP50).toBeNaN();
    expect(Object.keys(m.phases)).toEqual(["warmup", "reuse"]);
    expect(m.phases.reuse!.requests).toBe(2);
  });
});

describe("repetitions", () => {
  test("an unavailable configuration is reported, not failed", async () => {
    const r = await runConfiguration(
      {
        name: "x",
        description: "x",
        create: () => Promise.reject(new ConfigurationUnavailableError("x", "LLMEngine not built yet")),
      },
      workload([req("a")]),
      { repetitions: 3 },
    );
    expect(r).toMatchObject({ status: "not-available", reason: "LLMEngine not built yet", repetitions: [] });
  });
  test("a factory that fails is a failed configuration naming the error", async () => {
    const r = await runConfiguration(
      {
        name: "y",
        description: "y",
        create: () => Promise.reject(new RangeError("no GPU 3")),
      },
      workload([req("a")]),
      { repetitions: 2 },
    );
    expect(r.status).toBe("failed");
    expect(r.repetitions.length).toBe(2);
    expect(r.reason).toContain("RangeError: no GPU 3");
  });
});

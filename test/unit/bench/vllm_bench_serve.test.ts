// vLLM `bench serve` JSON keys: computed as vLLM computes them (population std, type-7 percentiles,
// TPOT over requests with more than one output token, completed requests only), per run and per configuration.
import { expect, test } from "bun:test";
import { aggregateRun } from "../../../bench/driver/aggregate.ts";
import { type RequestObservation, toRecord } from "../../../bench/driver/request_record.ts";
import { meanVllmBenchServeKeys, vllmBenchServeKeys } from "../../../bench/driver/vllm_bench_serve.ts";

function observation(id: string, sentMs: number, deltas: number[], extra: Partial<RequestObservation> = {}) {
  return toRecord({
    id,
    promptTokens: 100,
    dueMs: 0,
    sentMs,
    tokenDeltas: deltas.map((atMs) => ({ atMs, tokens: 1 })),
    finishMs: deltas[deltas.length - 1] ?? sentMs,
    cachedTokens: 0,
    rank: 0,
    finishReason: "length",
    ...extra,
  });
}

// TTFTs 10, 30 and 20 ms; the third request has one token (no TPOT); a fourth one failed.
const records = [
  observation("a", 0, [10, 20, 40]),
  observation("b", 0, [30, 50]),
  observation("c", 0, [20]),
  observation("d", 0, [], { error: "boom" }),
];

test("a run's keys: totals and rates over completed requests, vLLM's latency statistics", () => {
  const k = vllmBenchServeKeys(records, 2);
  expect(k).toMatchObject({
    duration: 2,
    completed: 3,
    total_input_tokens: 300,
    total_output_tokens: 6,
    request_throughput: 1.5,
    output_throughput: 3,
    total_token_throughput: 153,
    mean_ttft_ms: 20,
    median_ttft_ms: 20,
    // TPOT: (40 - 10) / 2 = 15 and (50 - 30) / 1 = 20; the single-token request has none.
    mean_tpot_ms: 17.5,
    median_tpot_ms: 17.5,
    std_tpot_ms: 2.5,
    // ITL gaps 10, 20 and 20.
    median_itl_ms: 20,
    mean_e2el_ms: (40 + 50 + 20) / 3,
  });
  expect(k.std_ttft_ms).toBeCloseTo(Math.sqrt(200 / 3), 12);
  expect(k.p99_ttft_ms).toBeCloseTo(29.8, 12);
  expect(k.mean_itl_ms).toBeCloseTo(50 / 3, 12);
});

test("an empty sample gives 0, as vLLM's `or 0` does", () => {
  const k = vllmBenchServeKeys([observation("c", 0, [20])], 1);
  expect([k.mean_tpot_ms, k.median_tpot_ms, k.std_tpot_ms, k.p99_tpot_ms, k.mean_itl_ms]).toEqual([0, 0, 0, 0, 0]);
});

test("every run's metrics carry the keys; a configuration's are the key-by-key mean of its runs", () => {
  const run = aggregateRun({ startedAtEpochMs: 0, elapsedMs: 2000, statsBefore: null, statsAfter: null, records });
  expect(run.vllmBenchServe).toEqual(vllmBenchServeKeys(records, 2));
  expect(run.vllmBenchServe.output_throughput).toBe(run.outputThroughput);
  const slower = vllmBenchServeKeys(records, 4);
  const mean = meanVllmBenchServeKeys([run.vllmBenchServe, slower])!;
  expect(mean.duration).toBe(3);
  expect(mean.output_throughput).toBe(2.25);
  expect(mean.mean_ttft_ms).toBe(20);
  expect(Object.keys(mean)).toEqual(Object.keys(slower));
  expect(meanVllmBenchServeKeys([])).toBeNull();
});

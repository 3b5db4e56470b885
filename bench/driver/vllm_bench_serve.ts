/**
 * The keys of vLLM's `vllm bench serve --save-result` JSON, computed the way vLLM computes them, so
 * a run's figures line up with published vLLM (and vLLM-reporting) results key for key: totals and
 * throughputs over completed requests, then mean/median/std/p99 of TTFT, TPOT (requests with more
 * than one output token), ITL (every gap) and E2E latency, in ms. As in vLLM, std is the population
 * standard deviation and an empty sample gives 0.
 * @module
 */
import { percentileOfSorted } from "../stats/percentile.ts";
import type { RequestRecord } from "./request_record.ts";

/** Mean, median, std and p99 of one latency, under vLLM's key names. */
type LatencyKeys<M extends string> =
  & Record<`mean_${M}_ms`, number>
  & Record<`median_${M}_ms`, number>
  & Record<`std_${M}_ms`, number>
  & Record<`p99_${M}_ms`, number>;

/** One run (or a mean over runs) in vLLM `bench serve` JSON keys. */
export type VllmBenchServeKeys =
  & {
    /** Seconds from the first request sent to the last one finished. */
    duration: number;
    completed: number;
    total_input_tokens: number;
    total_output_tokens: number;
    request_throughput: number;
    output_throughput: number;
    total_token_throughput: number;
  }
  & LatencyKeys<"ttft">
  & LatencyKeys<"tpot">
  & LatencyKeys<"itl">
  & LatencyKeys<"e2el">;

function latencyKeys<M extends string>(metric: M, values: readonly number[]): LatencyKeys<M> {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  const mean = n ? sorted.reduce((s, v) => s + v, 0) / n : 0;
  const variance = n ? sorted.reduce((s, v) => s + (v - mean) * (v - mean), 0) / n : 0;
  return {
    [`mean_${metric}_ms`]: mean,
    [`median_${metric}_ms`]: n ? percentileOfSorted(sorted, 50) : 0,
    [`std_${metric}_ms`]: Math.sqrt(variance),
    [`p99_${metric}_ms`]: n ? percentileOfSorted(sorted, 99) : 0,
  } as LatencyKeys<M>;
}

/** vLLM's keys for a run of `records` (failed ones left out) that took `durationS` seconds. */
export function vllmBenchServeKeys(records: readonly RequestRecord[], durationS: number): VllmBenchServeKeys {
  const ok = records.filter((r) => r.error === undefined);
  const input = ok.reduce((n, r) => n + r.promptTokens, 0);
  const output = ok.reduce((n, r) => n + r.outputTokens, 0);
  const rate = (x: number) => (durationS > 0 ? x / durationS : 0);
  return {
    duration: durationS,
    completed: ok.length,
    total_input_tokens: input,
    total_output_tokens: output,
    request_throughput: rate(ok.length),
    output_throughput: rate(output),
    total_token_throughput: rate(input + output),
    ...latencyKeys("ttft", ok.flatMap((r) => (r.ttftMs === null ? [] : [r.ttftMs]))),
    ...latencyKeys("tpot", ok.flatMap((r) => (r.tpotMs === null ? [] : [r.tpotMs]))),
    ...latencyKeys("itl", ok.flatMap((r) => r.itlMs)),
    ...latencyKeys("e2el", ok.map((r) => r.e2eMs)),
  };
}

/** The key-by-key mean of several runs' keys (a configuration's repetitions); null for none. */
export function meanVllmBenchServeKeys(runs: readonly VllmBenchServeKeys[]): VllmBenchServeKeys | null {
  const first = runs[0];
  if (!first) return null;
  const out: Record<string, number> = {};
  for (const key of Object.keys(first)) {
    out[key] = runs.reduce((s, r) => s + ((r as unknown as Record<string, number>)[key] as number), 0) / runs.length;
  }
  return out as VllmBenchServeKeys;
}

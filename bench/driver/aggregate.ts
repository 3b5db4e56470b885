/**
 * Aggregates one run: request and token throughput, TTFT/TPOT/ITL/E2E distributions, realized
 * prefix-hit rate (requests with cached tokens > 0) and token reuse (cached / prompt tokens),
 * transfers done during the run (difference of engine stats, with plans by kind, released source
 * blocks and dispatch-to-publish latency), per-rank request counts and a per-phase breakdown (each
 * phase with its own achieved throughput, over its own span).
 * Throughputs count completed requests only, over the run's elapsed time. The run is also given
 * under vLLM `bench serve`'s JSON keys.
 * @module
 */
import type { EngineStats } from "../../lib/core/engine_api.ts";
import { type Distribution, summarizeDistribution } from "../stats/distribution.ts";
import type { RequestRecord } from "./request_record.ts";
import type { RunResult } from "./run_workload.ts";
import { isGaugeCounter, type TransferMetrics, transferMetrics } from "./transfer_metrics.ts";
import { type VllmBenchServeKeys, vllmBenchServeKeys } from "./vllm_bench_serve.ts";

/** Latency and cache figures of a subset of requests (a phase, or the whole run). */
export interface LatencyBreakdown {
  requests: number;
  ttftMs: Distribution;
  tpotMs: Distribution;
  itlMs: Distribution;
  e2eMs: Distribution;
  prefixHitRate: number;
  tokenReuse: number;
}

/** A phase's figures: its latencies and cache ratios, and what it achieved from its first request sent to its
 * last one finished (a ladder rung's achieved rate beside its offered one). */
export interface PhaseBreakdown extends LatencyBreakdown {
  elapsedS: number;
  outputTokens: number;
  requestThroughput: number;
  outputThroughput: number;
}

/** Everything reported about one run. */
export interface RunMetrics extends LatencyBreakdown {
  completed: number;
  failed: number;
  errors: string[];
  elapsedS: number;
  promptTokens: number;
  outputTokens: number;
  cachedTokens: number;
  requestThroughput: number;
  outputThroughput: number;
  totalTokenThroughput: number;
  transfers: { count: number; blocks: number; bytes: number };
  /** What verifies the transfers: plans by kind, moves' released blocks, publish latency. */
  transferPlans: TransferMetrics;
  /** Control-plane counter differences (gauges such as transfer_publish_*: the value after). */
  routing: Record<string, number>;
  perRankRequests: Record<string, number>;
  phases: Record<string, PhaseBreakdown>;
  /** The same run under vLLM `bench serve`'s JSON keys, for side-by-side comparison. */
  vllmBenchServe: VllmBenchServeKeys;
}

/** `breakdown` of one phase's records plus its throughput over its own span (failed requests excluded). */
export function phaseBreakdown(records: readonly RequestRecord[]): PhaseBreakdown {
  const ok = records.filter((r) => r.error === undefined);
  const outputTokens = ok.reduce((n, r) => n + r.outputTokens, 0);
  const elapsedS = ok.length
    ? (Math.max(...ok.map((r) => r.finishMs)) - Math.min(...ok.map((r) => r.sentMs))) / 1000
    : 0;
  const rate = (x: number) => (elapsedS > 0 ? x / elapsedS : 0);
  return {
    ...breakdown(records),
    elapsedS,
    outputTokens,
    requestThroughput: rate(ok.length),
    outputThroughput: rate(outputTokens),
  };
}

/** Latency distributions and cache ratios over `records` (failed ones excluded). */
export function breakdown(records: readonly RequestRecord[]): LatencyBreakdown {
  const ok = records.filter((r) => r.error === undefined);
  const prompt = ok.reduce((n, r) => n + r.promptTokens, 0);
  const cached = ok.reduce((n, r) => n + r.cachedTokens, 0);
  return {
    requests: ok.length,
    ttftMs: summarizeDistribution(ok.flatMap((r) => (r.ttftMs === null ? [] : [r.ttftMs]))),
    tpotMs: summarizeDistribution(ok.flatMap((r) => (r.tpotMs === null ? [] : [r.tpotMs]))),
    itlMs: summarizeDistribution(ok.flatMap((r) => r.itlMs)),
    e2eMs: summarizeDistribution(ok.map((r) => r.e2eMs)),
    prefixHitRate: ok.length ? ok.filter((r) => r.cachedTokens > 0).length / ok.length : 0,
    tokenReuse: prompt ? cached / prompt : 0,
  };
}

function counterDelta(
  before: Record<string, number> | undefined,
  after: Record<string, number> | undefined,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after ?? {})) {
    if (typeof v === "number") {
      out[k] = isGaugeCounter(k) ? v : v - (before?.[k] ?? 0);
    }
  }
  return out;
}

function transferDelta(before: EngineStats | null, after: EngineStats | null): RunMetrics["transfers"] {
  const a = after?.transfers ?? { count: 0, blocks: 0, bytes: 0 };
  const b = before?.transfers ?? { count: 0, blocks: 0, bytes: 0 };
  return { count: a.count - b.count, blocks: a.blocks - b.blocks, bytes: a.bytes - b.bytes };
}

/** Aggregates a run. */
export function aggregateRun(run: RunResult): RunMetrics {
  const ok = run.records.filter((r) => r.error === undefined);
  const elapsedS = run.elapsedMs / 1000;
  const promptTokens = ok.reduce((n, r) => n + r.promptTokens, 0);
  const outputTokens = ok.reduce((n, r) => n + r.outputTokens, 0);
  const perRankRequests: Record<string, number> = {};
  for (const r of ok) perRankRequests[String(r.rank)] = (perRankRequests[String(r.rank)] ?? 0) + 1;
  const phases: Record<string, PhaseBreakdown> = {};
  const phaseNames = [...new Set(run.records.flatMap((r) => (r.phase === undefined ? [] : [r.phase])))];
  if (phaseNames.length > 1) {
    for (const p of phaseNames) phases[p] = phaseBreakdown(run.records.filter((r) => r.phase === p));
  }
  const rate = (x: number) => (elapsedS > 0 ? x / elapsedS : 0);
  return {
    ...breakdown(run.records),
    completed: ok.length,
    failed: run.records.length - ok.length,
    errors: [...new Set(run.records.flatMap((r) => (r.error === undefined ? [] : [r.error])))].slice(0, 10),
    elapsedS,
    promptTokens,
    outputTokens,
    cachedTokens: ok.reduce((n, r) => n + r.cachedTokens, 0),
    requestThroughput: rate(ok.length),
    outputThroughput: rate(outputTokens),
    totalTokenThroughput: rate(promptTokens + outputTokens),
    transfers: transferDelta(run.statsBefore, run.statsAfter),
    transferPlans: transferMetrics(run.statsBefore?.routing, run.statsAfter?.routing),
    routing: counterDelta(run.statsBefore?.routing, run.statsAfter?.routing),
    perRankRequests,
    phases,
    vllmBenchServe: vllmBenchServeKeys(run.records, elapsedS),
  };
}

/** The scalars that get Student-t intervals across repetitions, by stable key. */
export function scalarMetrics(m: RunMetrics): Record<string, number> {
  return {
    outputThroughput: m.outputThroughput,
    requestThroughput: m.requestThroughput,
    totalTokenThroughput: m.totalTokenThroughput,
    elapsedS: m.elapsedS,
    ttftMean: m.ttftMs.mean,
    ttftP50: m.ttftMs.p50,
    ttftP90: m.ttftMs.p90,
    ttftP99: m.ttftMs.p99,
    tpotMean: m.tpotMs.mean,
    tpotP99: m.tpotMs.p99,
    itlMean: m.itlMs.mean,
    e2eMean: m.e2eMs.mean,
    e2eP90: m.e2eMs.p90,
    e2eP99: m.e2eMs.p99,
    prefixHitRate: m.prefixHitRate,
    tokenReuse: m.tokenReuse,
    transferCount: m.transfers.count,
    transferBlocks: m.transfers.blocks,
    // Plans that started but did not complete, and routes moved by placement leases.
    transferAborted: m.routing.transfer_aborted ?? 0,
    leaseRoutes: m.routing.lease_routes ?? 0,
    transferPrefixCopies: m.transferPlans.completed.prefixCopy,
    transferOffloads: m.transferPlans.completed.offload,
    transferBackground: m.transferPlans.completed.background,
    transferReleasedBlocks: m.transferPlans.releasedBlocks,
    // NaN without completed plans: such repetitions stay out of the interval.
    transferPublishP50: m.transferPlans.publishMs?.p50 ?? Number.NaN,
    transferPublishP95: m.transferPlans.publishMs?.p95 ?? Number.NaN,
    transferPublishMax: m.transferPlans.publishMs?.max ?? Number.NaN,
    transferPublish1BlockP50: m.transferPlans.publish1BlockMs?.p50 ?? Number.NaN,
  };
}

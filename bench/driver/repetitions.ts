/**
 * Runs one configuration on one workload several times, each time on a fresh engine, and puts
 * two-sided 95% Student-t intervals on the per-repetition scalars. Only complete repetitions
 * (every request finished without error) enter the intervals; the others are kept with their error.
 * @module
 */
import type { GenerationEngine, ServedModelInfo } from "../../lib/core/engine_api.ts";
import { type ConfidenceInterval, studentTInterval } from "../stats/interval.ts";
import type { Workload } from "../workloads/types.ts";
import { aggregateRun, type RunMetrics, scalarMetrics } from "./aggregate.ts";
import { ConfigurationUnavailableError, type EngineConfiguration } from "./configuration.ts";
import type { RequestRecord } from "./request_record.ts";
import { type RunOptions, runWorkload } from "./run_workload.ts";
import { meanVllmBenchServeKeys, type VllmBenchServeKeys } from "./vllm_bench_serve.ts";

/** One repetition's outcome. */
export interface RepetitionResult {
  index: number;
  complete: boolean;
  metrics: RunMetrics | null;
  error?: string;
}

/** A configuration's results on one workload. */
export interface ConfigurationResult {
  name: string;
  description: string;
  status: "ok" | "not-available" | "failed";
  reason?: string;
  model?: ServedModelInfo;
  repetitions: RepetitionResult[];
  completeRepetitions: number;
  /** Per-scalar interval across complete repetitions (see scalarMetrics for the keys). */
  intervals: Record<string, ConfidenceInterval>;
  /** vLLM `bench serve` JSON keys, each the mean over complete repetitions (absent without one). */
  vllmBenchServe?: VllmBenchServeKeys;
}

/** Options of runConfiguration. */
export interface RepetitionOptions {
  repetitions: number;
  run?: RunOptions;
  /** Send one short untimed request first so kernels and graphs are ready (default true). */
  warmup?: boolean;
  log?: (line: string) => void;
  /** Called with each repetition's per-request records (index from 0), e.g. to save them. */
  onRun?: (repetition: number, records: readonly RequestRecord[]) => void;
}

async function warmUp(engine: GenerationEngine): Promise<void> {
  // Token ids no workload uses at its start, so the warm-up leaves no useful prefix behind.
  const top = Math.max(64, Math.min(engine.model.vocabSize, 150_000));
  const ids = Array.from({ length: 32 }, (_, i) => top - 64 + i);
  await engine.generate({ promptTokenIds: ids }, { maxTokens: 2, temperature: 0, ignoreEos: true });
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Runs `config` on `workload` `repetitions` times. */
export async function runConfiguration(
  config: EngineConfiguration,
  workload: Workload,
  options: RepetitionOptions,
): Promise<ConfigurationResult> {
  const log = options.log ?? (() => {});
  const result: ConfigurationResult = {
    name: config.name,
    description: config.description,
    status: "ok",
    repetitions: [],
    completeRepetitions: 0,
    intervals: {},
  };
  for (let rep = 0; rep < options.repetitions; rep++) {
    let engine: GenerationEngine;
    try {
      engine = await config.create();
    } catch (e) {
      if (e instanceof ConfigurationUnavailableError) {
        log(`  ${config.name}: not available: ${e.reason}`);
        return { ...result, status: "not-available", reason: e.reason };
      }
      result.repetitions.push({
        index: rep,
        complete: false,
        metrics: null,
        error: `engine creation failed: ${errorText(e)}`,
      });
      log(`  ${config.name} #${rep + 1}: engine creation failed: ${errorText(e)}`);
      continue;
    }
    try {
      result.model ??= engine.model;
      if (options.warmup ?? true) await warmUp(engine);
      const run = await runWorkload(engine, workload, { ...options.run, requestIdPrefix: `${config.name}-r${rep}-` });
      const metrics = aggregateRun(run);
      options.onRun?.(rep, run.records);
      const complete = metrics.failed === 0;
      result.repetitions.push({
        index: rep,
        complete,
        metrics,
        ...(complete ? {} : { error: metrics.errors.join("; ") }),
      });
      log(
        `  ${config.name} #${rep + 1}: ${metrics.outputThroughput.toFixed(1)} out tok/s, TTFT ${
          metrics.ttftMs.mean.toFixed(1)
        } ms, hit ${(metrics.prefixHitRate * 100).toFixed(1)}%${complete ? "" : `, ${metrics.failed} failed`}`,
      );
    } catch (e) {
      result.repetitions.push({ index: rep, complete: false, metrics: null, error: errorText(e) });
      log(`  ${config.name} #${rep + 1}: failed: ${errorText(e)}`);
    } finally {
      await engine.shutdown().catch((e: unknown) => log(`  ${config.name}: shutdown failed: ${errorText(e)}`));
    }
  }
  return summarizeRepetitions(result);
}

/**
 * Fills a configuration's intervals and vLLM keys from its complete repetitions (or marks it failed
 * when there is none). The simulator summarises its seeds with it too.
 */
export function summarizeRepetitions(result: ConfigurationResult): ConfigurationResult {
  const complete = result.repetitions.filter((r) => r.complete && r.metrics);
  result.completeRepetitions = complete.length;
  if (complete.length === 0) {
    return {
      ...result,
      status: "failed",
      reason: result.repetitions.find((r) => r.error)?.error ?? "no complete repetition",
    };
  }
  const scalars = complete.map((r) => scalarMetrics(r.metrics as RunMetrics));
  const vllmKeys = meanVllmBenchServeKeys(complete.map((r) => (r.metrics as RunMetrics).vllmBenchServe));
  if (vllmKeys) result.vllmBenchServe = vllmKeys;
  for (const key of Object.keys(scalars[0] as Record<string, number>)) {
    const values = scalars.map((s) => s[key] as number).filter((v) => Number.isFinite(v));
    if (values.length > 0) result.intervals[key] = studentTInterval(values);
  }
  return result;
}

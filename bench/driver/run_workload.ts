/**
 * Runs one workload against any GenerationEngine through stream(): the shared scheduler decides
 * when each request goes; this file sends it, timestamps every streamed delta and reads the
 * engine's cache/rank facts from the final output, plus the engine's stats before and after.
 * @module
 */
import type { EngineStats, GenerationEngine } from "../../lib/core/engine_api.ts";
import type { FinishReason, PromptInput, RequestOutput } from "../../lib/core/outputs.ts";
import type { SamplingParams } from "../../lib/core/sampling_params.ts";
import type { Workload, WorkloadRequest } from "../workloads/types.ts";
import { type RequestObservation, startObservation } from "./request_record.ts";
import { runSchedule, type ScheduledRun, type ScheduleOptions } from "./schedule.ts";

/** How to run a workload on an engine. */
export interface RunOptions extends ScheduleOptions {
  /** Temperature of requests that do not set one (default 0.6, the reference's). */
  temperature?: number;
  /** Prefix of engine request ids, so repetitions never reuse one. */
  requestIdPrefix?: string;
  signal?: AbortSignal;
}

/** The raw outcome of one run. */
export interface RunResult extends ScheduledRun {
  statsBefore: EngineStats | null;
  statsAfter: EngineStats | null;
}

/** The part of GenerationEngine the driver uses. */
export type DrivenEngine = Pick<GenerationEngine, "stream" | "stats" | "currentStats">;

function promptOf(r: WorkloadRequest): PromptInput {
  if (r.promptTokenIds) return { promptTokenIds: r.promptTokenIds };
  if (r.prompt !== undefined) return r.prompt;
  throw new TypeError(`request ${r.id} has neither promptTokenIds nor prompt`);
}

async function safeStats(engine: DrivenEngine): Promise<EngineStats | null> {
  try {
    // Current counters: a lagging snapshot would miss the run's last transfers and routes.
    return structuredClone(engine.currentStats ? await engine.currentStats() : engine.stats());
  } catch {
    return null;
  }
}

async function sendToEngine(
  engine: DrivenEngine,
  r: WorkloadRequest,
  now: () => number,
  dueMs: number,
  options: RunOptions,
): Promise<RequestObservation> {
  const obs = startObservation(r, dueMs, now());
  try {
    const params: Partial<SamplingParams> = {
      maxTokens: r.maxTokens,
      temperature: r.temperature ?? options.temperature ?? 0.6,
      ignoreEos: r.ignoreEos ?? false,
    };
    let output: RequestOutput | undefined;
    let reason: FinishReason | undefined;
    const stream = engine.stream(promptOf(r), params, {
      requestId: `${options.requestIdPrefix ?? ""}${r.id}`,
      ...(r.sessionId !== undefined ? { sessionId: r.sessionId } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    for await (const delta of stream) {
      if (delta.tokenIds.length > 0) obs.tokenDeltas.push({ atMs: now(), tokens: delta.tokenIds.length });
      if (delta.finished) {
        reason = delta.finishReason;
        output = delta.output;
      }
    }
    obs.finishMs = now();
    if (!output) throw new Error(`request ${r.id}: the stream ended without a final output`);
    obs.finishReason = reason ?? output.finishReason;
    obs.promptTokens = output.promptTokenIds.length;
    obs.cachedTokens = output.metrics.numCachedTokens;
    obs.rank = output.metrics.rank;
    if (obs.finishReason === "error" || obs.finishReason === "abort") {
      obs.error = `finished with reason ${obs.finishReason}`;
    }
  } catch (e) {
    obs.finishMs = now();
    obs.finishReason = "error";
    obs.error = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
  }
  return obs;
}

/** Runs `workload` on `engine` and measures every request. */
export async function runWorkload(
  engine: DrivenEngine,
  workload: Workload,
  options: RunOptions = {},
): Promise<RunResult> {
  const statsBefore = await safeStats(engine);
  const run = await runSchedule(workload, options, (r, now, dueMs) => sendToEngine(engine, r, now, dueMs, options));
  return { ...run, statsBefore, statsAfter: await safeStats(engine) };
}

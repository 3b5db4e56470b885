/**
 * Builds the engine the server runs from its command-line options. This is the one place that
 * chooses between the single-GPU LLM and the multi-GPU LLMEngine.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { LLM } from "../engine/llm.ts";
import type { ServeCliOptions } from "./cli.ts";

/** Engine options the CLI controls (the model is a resolved directory). */
export type ServeEngineOptions = Pick<
  ServeCliOptions,
  "gpus" | "backend" | "blockSize" | "gpuMemoryUtilization" | "maxNumSeqs" | "maxNumBatchedTokens" | "maxModelLen" | "routingPolicy" | "nvlinkPairs"
> & { modelDir: string };

/** Start-up callbacks: notes about options without effect, and weight-loading progress. */
export interface ServeEngineHooks {
  warn(message: string): void;
  onLoadProgress?(loadedBytes: number, totalBytes: number): void;
}

/** Creates the serving engine. */
export async function createServeEngine(o: ServeEngineOptions, hooks: ServeEngineHooks): Promise<GenerationEngine> {
  const perGpu = {
    model: o.modelDir,
    backend: o.backend,
    blockSize: o.blockSize,
    gpuMemoryUtilization: o.gpuMemoryUtilization,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    maxModelLen: o.maxModelLen,
    onProgress: hooks.onLoadProgress,
  };
  // SWITCH POINT: once lib/engine/llm_engine.ts exists, serve every --gpus value (1 GPU = 1 worker)
  // through `LLMEngine.create({ ...perGpu, gpus: o.gpus, routingPolicy: o.routingPolicy, nvlinkPairs: o.nvlinkPairs })`.
  if (o.gpus > 1) {
    throw new RangeError(`--gpus ${o.gpus} needs the multi-GPU LLMEngine (lib/engine/llm_engine.ts), which this build does not have yet; use --gpus 1`);
  }
  if (o.routingPolicy !== undefined || o.nvlinkPairs !== undefined) hooks.warn("--routing-policy and --nvlink-pairs only matter with --gpus > 1; ignored.");
  return LLM.create(perGpu);
}

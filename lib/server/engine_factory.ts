/**
 * Builds the engine the server runs from its command-line options. This is the one place that
 * chooses between the single-GPU LLM and the multi-GPU LLMEngine.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { LLMEngine } from "../engine/llm_engine.ts";
import { POLICY_NAMES, type PolicyName } from "../global/routing_config.ts";
import type { ServeCliOptions } from "./cli.ts";

/** Engine options the CLI controls (the model is a resolved directory). */
export type ServeEngineOptions = Pick<
  ServeCliOptions,
  "gpus" | "backend" | "blockSize" | "gpuMemoryUtilization" | "maxNumSeqs" | "maxNumBatchedTokens" | "longPrefillChunk" | "maxModelLen" | "routingPolicy" | "nvlinkPairs"
> & { modelDir: string };

/** Creates the serving engine. */
export async function createServeEngine(o: ServeEngineOptions): Promise<GenerationEngine> {
  // Every --gpus value runs through LLMEngine (1 GPU = 1 worker process), so the server always has
  // the control plane's routing, supervision and metrics; `LLM` stays the in-process library API.
  if (o.routingPolicy !== undefined && !(POLICY_NAMES as readonly string[]).includes(o.routingPolicy)) {
    throw new RangeError(`--routing-policy ${JSON.stringify(o.routingPolicy)} is not one of ${POLICY_NAMES.join(", ")}`);
  }
  // Workers load the weights in their own processes and print their own progress.
  return LLMEngine.create({
    model: o.modelDir,
    backend: o.backend,
    blockSize: o.blockSize,
    gpuMemoryUtilization: o.gpuMemoryUtilization,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    longPrefillChunk: o.longPrefillChunk,
    maxModelLen: o.maxModelLen,
    gpus: o.gpus,
    ...(o.routingPolicy !== undefined ? { routing: { policy: o.routingPolicy as PolicyName } } : {}),
    ...(o.nvlinkPairs !== undefined ? { topology: o.nvlinkPairs } : {}),
  });
}

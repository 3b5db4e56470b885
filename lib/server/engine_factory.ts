/**
 * Builds the engine the server runs from its command-line options. This is the one place that
 * chooses between the single-GPU LLM and the multi-GPU LLMEngine. Options that can be checked
 * without starting a process (the model's context length, the native library of --backend) are
 * checked first, so their errors name the flag instead of surfacing as a worker's exit.
 * @module
 */
import type { GenerationEngine } from "../core/engine_api.ts";
import { LLMEngine } from "../engine/llm_engine.ts";
import { POLICY_NAMES, type PolicyName } from "../global/routing_config.ts";
import { readModelSpec } from "../model/config.ts";
import { loadLibrary } from "../../ffi/loader.ts";
import { libzmqUnavailable } from "../../ffi/zmq/libzmq.ts";
import { ZmqError } from "../../ffi/zmq/zmq_errors.ts";
import { kvEventsEnabled } from "../kv_events/kv_events_config.ts";
import type { ServeCliOptions } from "./cli.ts";
import { StartupError } from "./startup_errors.ts";

/** Engine options the CLI controls (the model is a resolved directory). */
export type ServeEngineOptions =
  & Pick<
    ServeCliOptions,
    | "gpus"
    | "backend"
    | "blockSize"
    | "gpuMemoryUtilization"
    | "maxNumSeqs"
    | "maxNumBatchedTokens"
    | "longPrefillChunk"
    | "maxModelLen"
    | "routingPolicy"
    | "nvlinkPairs"
  >
  & Partial<Pick<ServeCliOptions, "numGpuBlocksOverride" | "kvTransfers" | "kvEventsConfig">>
  & { modelDir: string };

/** Checks what can be checked before any process starts; throws StartupError naming the flag. */
function checkServeEngineOptions(o: ServeEngineOptions): void {
  if (o.routingPolicy !== undefined && !(POLICY_NAMES as readonly string[]).includes(o.routingPolicy)) {
    throw new StartupError(
      "--routing-policy",
      `${JSON.stringify(o.routingPolicy)} is not one of ${POLICY_NAMES.join(", ")}`,
    );
  }
  if (o.maxModelLen !== undefined) {
    const modelMax = readModelSpec(o.modelDir).maxModelLen;
    if (o.maxModelLen > modelMax) {
      throw new StartupError(
        "--max-model-len",
        `${o.maxModelLen} is above the model's context length ${modelMax} (max_position_embeddings); pass at most ${modelMax}, or leave it out`,
      );
    }
  }
  if (kvEventsEnabled(o.kvEventsConfig)) {
    const missing = libzmqUnavailable();
    if (missing !== undefined) throw new StartupError("--kv-events-config", `is set, but ${missing}`);
  }
  if (o.backend !== undefined) {
    try {
      loadLibrary({ backend: o.backend }).lib.close();
    } catch (e) {
      const why = e instanceof Error ? e.message.replace(/\s*\n\s*/g, "; ") : String(e);
      const fix = o.backend === "cuda"
        ? "build it with `make native` on a machine with CUDA, or use --backend cpu"
        : "build it with `make native`";
      throw new StartupError("--backend", `${o.backend}: its native library does not load (${why}); ${fix}`);
    }
  }
}

/** Creates the serving engine. */
export async function createServeEngine(o: ServeEngineOptions): Promise<GenerationEngine> {
  checkServeEngineOptions(o);
  // Every --gpus value runs through LLMEngine (1 GPU = 1 worker process), so the server always has
  // the control plane's routing, supervision and metrics; `LLM` stays the in-process library API.
  // Workers load the weights in their own processes and print their own progress.
  const create = LLMEngine.create({
    model: o.modelDir,
    backend: o.backend,
    blockSize: o.blockSize,
    gpuMemoryUtilization: o.gpuMemoryUtilization,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    longPrefillChunk: o.longPrefillChunk,
    maxModelLen: o.maxModelLen,
    gpus: o.gpus,
    ...(o.numGpuBlocksOverride !== undefined ? { numBlocks: o.numGpuBlocksOverride } : {}),
    ...(o.kvTransfers !== undefined ? { transfers: o.kvTransfers } : {}),
    ...(o.routingPolicy !== undefined ? { routing: { policy: o.routingPolicy as PolicyName } } : {}),
    ...(o.nvlinkPairs !== undefined ? { topology: o.nvlinkPairs } : {}),
    ...(o.kvEventsConfig !== undefined ? { kvEvents: o.kvEventsConfig } : {}),
  });
  // A ZeroMQ failure at start-up is one of the event sockets (a taken port, an unknown host).
  return await create.catch((e) => {
    throw e instanceof ZmqError
      ? new StartupError(
        "--kv-events-config",
        `cannot open its sockets: ${e.message}; change endpoint or replay_endpoint`,
      )
      : e;
  });
}

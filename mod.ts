/**
 * LMPool: multi-GPU LLM serving with coordinated paged KV caches.
 *
 * One `LLMEngine` runs a control plane and one worker per GPU (data-parallel replicas), routes each
 * request to the GPU that holds its KV prefix when that pays, and moves KV blocks between NVLink
 * partners when reuse pays for the transfer. `LLM` runs the same per-GPU engine in-process on one
 * device. `serve` starts the OpenAI-compatible HTTP server. This module only re-exports.
 *
 * @example
 * ```ts
 * import { LLM, ensureModel } from "./mod.ts";
 * const llm = await LLM.create({ model: await ensureModel("tiny") });
 * const [out] = await llm.generate("Hello", { maxTokens: 8, temperature: 0 });
 * console.log(out!.tokenIds);
 * await llm.shutdown();
 * ```
 * @module
 */
export {
  AbortedError,
  CapacityError,
  DisposedError,
  ModelFormatError,
  NativeError,
  NativeLibraryNotFoundError,
  WorkerDiedError,
} from "./lib/core/errors.ts";
export { DEFAULT_SAMPLING_PARAMS, resolveSamplingParams } from "./lib/core/sampling_params.ts";
export type { SamplingParams } from "./lib/core/sampling_params.ts";
export type { FinishReason, PromptInput, RequestMetrics, RequestOptions, RequestOutput, StreamDelta } from "./lib/core/outputs.ts";
export type { ChatMessage, EngineStats, GenerationEngine, RankStats, ServedModelInfo, TextTokenizer } from "./lib/core/engine_api.ts";
export { blockHash, prefixBlockHashes, rootHash } from "./lib/core/block_hash.ts";
export type { BlockHash } from "./lib/core/block_hash.ts";

export { LLM } from "./lib/engine/llm.ts";
export type { LLMConfig, LLMOptions } from "./lib/engine/llm.ts";
export { LLMEngine } from "./lib/engine/llm_engine.ts";
export type { LLMEngineOptions } from "./lib/engine/llm_engine.ts";
export { serve } from "./lib/server/serve.ts";
export type { RunningServer, ServeOptions } from "./lib/server/serve.ts";

export { DEFAULT_ROUTING_CONFIG, POLICY_NAMES, resolveRoutingConfig } from "./lib/global/routing_config.ts";
export type { PolicyName, RoutingConfig, RoutingConfigInput } from "./lib/global/routing_config.ts";
export { DEFAULT_TRANSFER_CONFIG, TRANSFER_MODES } from "./lib/transfer/control/transfer_config.ts";
export type { TransferConfig, TransferConfigInput, TransferModeSetting } from "./lib/transfer/control/transfer_config.ts";
export { NvlinkTopology, parseNvidiaSmiTopo } from "./lib/global/topology.ts";
export { NoHealthyRankError } from "./lib/global/global_scheduler.ts";

export { loadModel } from "./lib/model/loader.ts";
export type { LoadedModel, LoadModelOptions } from "./lib/model/loader.ts";
export { readModelSpec, SUPPORTED_ARCHITECTURES } from "./lib/model/config.ts";
export type { ModelSpec } from "./lib/model/config.ts";
export { ModelTokenizer } from "./lib/model/tokenizer.ts";
export { ensureModel } from "./lib/model/demo_model.ts";
export { writeSyntheticModel } from "./lib/model/synthetic_writer.ts";
export { IncrementalDetokenizer } from "./lib/model/incremental_detokenizer.ts";
export { StopStringMatcher } from "./lib/model/stop_strings.ts";

export { KvCache, Native, NativeModel, native } from "./ffi/native.ts";
export type { NativeModelConfig, StepBatch } from "./ffi/native.ts";
export type { BackendKind } from "./ffi/loader.ts";

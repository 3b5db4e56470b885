/**
 * LMPool: multi-GPU LLM serving with coordinated paged KV caches.
 *
 * One `LLMEngine` runs a control plane and one worker per GPU (data-parallel replicas), routes each
 * request to the GPU that holds its KV prefix when that pays, and moves KV blocks between NVLink
 * partners when reuse pays for the transfer. `LLM` runs the same per-GPU engine in-process on one
 * device. `serve` starts the OpenAI-compatible HTTP server (`listen` binds its port first).
 * `LLMEngine`'s `kvEvents` option (from `parseKvEventsConfig`, vLLM's `--kv-events-config`)
 * publishes KV-cache events in vLLM's wire format over ZeroMQ for llm-d's router. This
 * module only re-exports what users need; the rest sits behind subpath exports: `./native` (the
 * FFI facade), `./model` (model directories, tokenizer, detokenizer), `./routing` (routing config,
 * NVLink topology, block hashes) and `./transfer` (transfer options).
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
export { NoHealthyRankError } from "./lib/global/global_scheduler.ts";
export { DEFAULT_SAMPLING_PARAMS, resolveSamplingParams } from "./lib/core/sampling_params.ts";
export type { SamplingParams } from "./lib/core/sampling_params.ts";
export type {
  FinishReason,
  PromptInput,
  RequestMetrics,
  RequestOptions,
  RequestOutput,
  StreamDelta,
} from "./lib/core/outputs.ts";
export type {
  ChatMessage,
  EngineStats,
  GenerationEngine,
  RankStats,
  ServedModelInfo,
  TextTokenizer,
} from "./lib/core/engine_api.ts";

export { LLM } from "./lib/engine/llm.ts";
export type { LLMConfig, LLMOptions } from "./lib/engine/llm.ts";
export { LLMEngine } from "./lib/engine/llm_engine.ts";
export type { LLMEngineOptions } from "./lib/engine/llm_engine.ts";
export { listen, serve } from "./lib/server/serve.ts";
export type { ListenOptions, RunningServer, ServeOptions, ServerListener } from "./lib/server/serve.ts";

export { POLICY_NAMES } from "./lib/global/routing_config.ts";
export type { PolicyName, RoutingConfigInput } from "./lib/global/routing_config.ts";
export { TRANSFER_MODES } from "./lib/transfer/control/transfer_config.ts";
export type {
  DataPathSetting,
  TransferConfigInput,
  TransferModeSetting,
  TransferOptions,
} from "./lib/transfer/control/transfer_config.ts";
export { parseKvEventsConfig } from "./lib/kv_events/kv_events_config.ts";
export type { KvEventsConfig, KvEventsGranularity } from "./lib/kv_events/kv_events_config.ts";
export { ensureModel } from "./lib/model/demo_model.ts";
export type { EnsureModelOptions } from "./lib/model/demo_model.ts";

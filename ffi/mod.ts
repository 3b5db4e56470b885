/**
 * `lmpool/native`: the typed facade of LMPool's C ABI (per-kernel calls for tests and benchmarks,
 * the model and KV-cache handles) and the backend choice. Most users need only the root module.
 * @module
 */
export { KvCache, Native, native, NativeModel } from "./native.ts";
export type { NativeModelConfig, StepBatch } from "./native.ts";
export type { BackendKind } from "./loader.ts";

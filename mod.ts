/**
 * LMPool: multi-GPU LLM serving with coordinated paged KV caches.
 *
 * This module only re-exports the public API.
 *
 * @example
 * ```ts
 * import { Native } from "./mod.ts";
 * const native = new Native(); // CUDA when a GPU is visible, else the CPU reference
 * console.log(native.backend, native.deviceCount());
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
export { KvCache, Native, NativeModel, native } from "./ffi/native.ts";
export type { NativeModelConfig, StepBatch } from "./ffi/native.ts";
export type { BackendKind } from "./ffi/loader.ts";

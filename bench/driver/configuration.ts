/**
 * A system configuration compared in a benchmark (single GPU, a routing policy, full LMPool):
 * a name and a factory that builds a fresh engine for each repetition, so no KV cache or page
 * table carries over between repetitions.
 * @module
 */
import type { GenerationEngine } from "../../lib/core/engine_api.ts";

/** One compared configuration. */
export interface EngineConfiguration {
  name: string;
  description: string;
  /** A fresh engine; throws ConfigurationUnavailableError when it cannot run here. */
  create(): Promise<GenerationEngine>;
}

/** The configuration cannot run in this build or on this machine (reported, not a failure). */
export class ConfigurationUnavailableError extends Error {
  override readonly name = "ConfigurationUnavailableError";
  constructor(
    readonly configuration: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`${configuration}: not available: ${reason}`, options);
  }
}

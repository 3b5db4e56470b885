/**
 * The system configurations the end-to-end benchmark compares, each a factory for a fresh engine:
 * - single-gpu: the in-process LLM on one GPU (no global pool);
 * - one per routing policy (round-robin, least-loaded, prefix-only, cache-aware, weighted-scorers,
 *   session-affinity, and lmpool's cost model as "lmpool-routing"): LLMEngine on N GPUs with that
 *   policy and every transfer path off;
 * - transfer-rr: LLMEngine with KV transfer on and round-robin dispatch (transfer isolated from routing);
 * - lmpool: the full system (cost-model routing plus foreground and background transfer).
 * Every configuration gets the same model, backend, block size and per-GPU KV block budget.
 * @module
 */
import type { GenerationEngine } from "../lib/core/engine_api.ts";
import { LLM } from "../lib/engine/llm.ts";
import { LLMEngine } from "../lib/engine/llm_engine.ts";
import type { PolicyName } from "../lib/global/routing_config.ts";
import { splitTransferSettings } from "../lib/transfer/control/transfer_tuning.ts";
import { describeGpus } from "./cli_options.ts";
import type { EngineConfiguration } from "./driver/configuration.ts";

/** What every configuration shares. */
export interface EngineContext {
  modelDir: string;
  backend?: "cpu" | "cuda";
  /** CUDA device of each data-parallel rank of the multi-GPU configurations (repeats put several ranks on one device); single-gpu runs on the first. */
  gpus: readonly number[];
  blockSize?: number;
  kvBlocksPerGpu?: number;
  /** NVLink pairs, e.g. "0-1" (default: LLMEngine's, from LMPOOL_NVLINK_PAIRS or nvidia-smi). */
  topology?: string;
  /**
   * Transfer mode of the transfer configurations (default "auto", cost-gated). "force" admits
   * every candidate plan: for checking the transfer mechanisms and their report, not for speed.
   */
  transferMode?: "auto" | "force";
  /**
   * Further transfer settings of the transfer configurations: options go to LLMEngine's `transfers`,
   * cost-model constants to its internal `transferTuning`; both are checked there.
   */
  transferOptions?: Record<string, unknown>;
}

/** Names of all configurations, in report order. */
export const CONFIGURATION_NAMES = [
  "single-gpu",
  "round-robin",
  "least-loaded",
  "prefix-only",
  "cache-aware",
  "weighted-scorers",
  "session-affinity",
  "lmpool-routing",
  "transfer-rr",
  "lmpool",
] as const;

/** One of CONFIGURATION_NAMES. */
export type ConfigurationName = (typeof CONFIGURATION_NAMES)[number];

const DESCRIPTIONS: Record<ConfigurationName, string> = {
  "single-gpu": "one GPU, in-process LLM, local prefix cache only",
  "round-robin": "N GPUs, round-robin dispatch, transfers off",
  "least-loaded": "N GPUs, least-loaded routing, transfers off",
  "prefix-only": "N GPUs, longest cached prefix wins, transfers off",
  "cache-aware": "N GPUs, cache-aware routing with a load-balance fallback, transfers off",
  "weighted-scorers": "N GPUs, weighted prefix/queue/KV-usage scorers, transfers off",
  "session-affinity": "N GPUs, sticky sessions, transfers off",
  "lmpool-routing": "N GPUs, LMPool's cost-model routing, transfers off",
  "transfer-rr": "N GPUs, KV transfer on, round-robin dispatch",
  lmpool: "N GPUs, cost-model routing with foreground and background KV transfer",
};

function createSingleGpu(ctx: EngineContext): Promise<GenerationEngine> {
  return LLM.create({
    model: ctx.modelDir,
    device: ctx.gpus[0] ?? 0,
    ...(ctx.backend ? { backend: ctx.backend } : {}),
    ...(ctx.blockSize ? { blockSize: ctx.blockSize } : {}),
    ...(ctx.kvBlocksPerGpu ? { numBlocks: ctx.kvBlocksPerGpu } : {}),
  });
}

// Multi-GPU LLMEngine configurations: routing-only ones run with every transfer path off; the
// transfer ones pass their switches to LLMEngine's `transfers` option (mode "auto", cost-gated,
// unless the context forces them).
const OFF = { foreground: false, background: false };
const ON = { foreground: true, background: true };
/** Routing policy (lib/global/routing_config.ts POLICY_NAMES) and transfer switches per configuration. */
export const MULTI_GPU_SETTINGS: Readonly<
  Record<
    Exclude<ConfigurationName, "single-gpu">,
    { policy: PolicyName; transfer: { foreground: boolean; background: boolean } }
  >
> = {
  "round-robin": { policy: "round-robin", transfer: OFF },
  "least-loaded": { policy: "least-loaded", transfer: OFF },
  "prefix-only": { policy: "prefix-only", transfer: OFF },
  "cache-aware": { policy: "cache-aware", transfer: OFF },
  "weighted-scorers": { policy: "weighted-scorers", transfer: OFF },
  "session-affinity": { policy: "session-affinity", transfer: OFF },
  "lmpool-routing": { policy: "lmpool", transfer: OFF },
  "transfer-rr": { policy: "round-robin", transfer: ON },
  lmpool: { policy: "lmpool", transfer: ON },
};

function createMultiGpu(name: Exclude<ConfigurationName, "single-gpu">, ctx: EngineContext): Promise<GenerationEngine> {
  const s = MULTI_GPU_SETTINGS[name];
  const wantsTransfer = s.transfer.foreground || s.transfer.background;
  const { options, tuning } = splitTransferSettings(ctx.transferOptions ?? {});
  return LLMEngine.create({
    model: ctx.modelDir,
    gpus: [...ctx.gpus],
    ...(ctx.backend ? { backend: ctx.backend } : {}),
    ...(ctx.blockSize ? { blockSize: ctx.blockSize } : {}),
    ...(ctx.kvBlocksPerGpu ? { numBlocks: ctx.kvBlocksPerGpu } : {}),
    ...(ctx.topology ? { topology: ctx.topology } : {}),
    routing: { policy: s.policy },
    // Start-up chatter would drown the benchmark's own lines; failures still surface as errors.
    log: null,
    // What --transfer-options sets (a switch included) wins over the configuration's defaults.
    transfers: wantsTransfer ? { ...s.transfer, mode: ctx.transferMode ?? "auto", ...options } : "off",
    ...(wantsTransfer ? { transferTuning: tuning } : {}),
  });
}

/** The named configurations for `ctx`; throws a RangeError naming an unknown one. */
export function buildConfigurations(names: readonly string[], ctx: EngineContext): EngineConfiguration[] {
  return names.map((n) => {
    if (!(CONFIGURATION_NAMES as readonly string[]).includes(n)) {
      throw new RangeError(`unknown configuration ${JSON.stringify(n)}; known: ${CONFIGURATION_NAMES.join(", ")}`);
    }
    const name = n as ConfigurationName;
    const forced = ctx.transferMode === "force" && name !== "single-gpu" && MULTI_GPU_SETTINGS[name].transfer.foreground
      ? " (transfers forced: no cost gate)"
      : "";
    const firstDevice = ctx.gpus[0] ?? 0;
    const single = DESCRIPTIONS["single-gpu"] + (firstDevice === 0 ? "" : ` (device ${firstDevice})`);
    const description =
      (name === "single-gpu" ? single : DESCRIPTIONS[name].replace("N GPUs", describeGpus(ctx.gpus))) + forced;
    return {
      name,
      description,
      create: () => (name === "single-gpu" ? createSingleGpu(ctx) : createMultiGpu(name, ctx)),
    };
  });
}

/**
 * The constants of KV transfer's cost model, planner and placement: plan sizes, hotness, load skew,
 * leases and the cost model's cold-start estimates. They are internal (not in mod.ts): their
 * defaults are what the design and the benchmarks settled on, and users set the knobs of
 * transfer_config.ts instead. Tests and benchmarks override them through LLMEngine's internal
 * `transferTuning` option. Times are ms; sizes are blocks unless named otherwise.
 * @module
 */

/** Every transfer constant. */
export interface TransferTuning {
  /** Smallest plan worth a transaction. Default 1. */
  minBatchBlocks: number;
  /** Largest foreground plan (one request's shortage). Default 256. */
  foregroundMaxBlocks: number;
  /** Per-chain cap of a background candidate (background_copy_max_blocks). Default 8. */
  backgroundCopyMaxBlocks: number;
  /** Per directed pair cap of one coalesced background plan (background_copy_batch_max_blocks). Default 128. */
  backgroundCopyBatchMaxBlocks: number;
  /** Placement pass period. Default 100 ms. */
  placementIntervalMs: number;
  /** Hotness a chain needs to become a candidate. Default 4. */
  hotnessThreshold: number;
  /** Hotness half-life. Default 30000 ms. */
  hotnessHalfLifeMs: number;
  /** Hotness added per complete-chain access (a route whose prefix matched). Default 1. */
  accessWeight: number;
  /** Extra hotness per route hit on the chosen rank. Default 1. */
  routeHitWeight: number;
  /** Hotness per query that wants the chain (demand visible at ingress). Default 0.5. */
  demandWeight: number;
  /** Chains tracked at most (coldest forgotten first). Default 4096. */
  maxTrackedChains: number;
  /** Background copy only when source queue work exceeds the target's by this many tokens. Default 256. */
  minLoadSkewTokens: number;
  /** ...and by this factor. Default 1.5. */
  minLoadSkewRatio: number;
  /** No second placement of one chain to one rank within this time. Default 10000 ms. */
  cooldownMs: number;
  /**
   * Share of a rank's KV blocks it keeps free beyond a chain it takes unasked (a background copy or
   * an offload move). Such a chain arrives with no access, so it is the first block reclaimed there:
   * room the rank's own next prompts take would evict it before anyone reused it, and its transfer
   * would be wasted. Default 0.125.
   */
  targetReserveShare: number;
  /** How long routing prefers a placement's destination for its prefix. Default 30000 ms. */
  leaseMs: number;
  /**
   * A lease's rank wins when its projected cost is within this many token-equivalents of the best.
   * Default 0: the cost model already sees the copied prefix there, so a lease overrides its pick
   * only while the owner stays overloaded (the skew case of placement_leases.ts).
   */
  leaseRouteBonusTokens: number;
  /**
   * Foreground offload: whether a partner's cached blocks colder than a moved chain count as room
   * there (its reclamation would free them first), besides its free blocks. Default false: on
   * recurring traffic the two ranks' caches are about equally hot, and moves that evict the
   * partner's cache only trade one prefix for another while their requests wait.
   */
  offloadIntoColderCache: boolean;
  /** Foreground offload: expected reuses of a moved chain per past access, discounted. Default 0.5. */
  foregroundReuseDiscount: number;
  /** ...counting at most this many reuses. Default 4. */
  foregroundMaxReuse: number;
  /** Prefill cost per token until worker step timings say otherwise. Default 0.02 ms. */
  prefillMsPerToken: number;
  /** Cold-start cost of a direct-path (NVLink) transfer: fixed latency (default 0 ms) ... */
  fallbackFixedMs: number;
  /** ... plus bytes / this bandwidth (default 3.7e8 bytes/ms = 370 GB/s, an H200 pair's copy-engine path). */
  fallbackBytesPerMs: number;
  /**
   * Cold-start cost of a device-local transfer (two ranks of one CUDA device: a device-to-device
   * copy through a CUDA IPC mapping): fixed latency, the plan's control round trips and the copy's
   * dispatch, which no payload is too small to pay (default 0.75 ms) ...
   */
  deviceLocalFixedMs: number;
  /** ... plus bytes / this bandwidth (default 1.5e9 bytes/ms = 1.5 TB/s: HBM read and written once per byte). */
  deviceLocalBytesPerMs: number;
  /** Cold-start cost of a host-path transfer (gather, worker socket, scatter): fixed latency (default 1 ms) ... */
  hostFixedMs: number;
  /** ... plus bytes / this bandwidth (default 2e5 bytes/ms = 200 MB/s). */
  hostBytesPerMs: number;
  /** Loaded-inference interference on the data-path term. Default 1. */
  interferenceFactor: number;
  /** Weight of a new observation in the online EWMAs. Default 0.2. */
  ewmaAlpha: number;
}

/** The constants' values. */
export const DEFAULT_TRANSFER_TUNING: Readonly<TransferTuning> = Object.freeze({
  minBatchBlocks: 1,
  foregroundMaxBlocks: 256,
  backgroundCopyMaxBlocks: 8,
  backgroundCopyBatchMaxBlocks: 128,
  placementIntervalMs: 100,
  hotnessThreshold: 4,
  hotnessHalfLifeMs: 30_000,
  accessWeight: 1,
  routeHitWeight: 1,
  demandWeight: 0.5,
  maxTrackedChains: 4096,
  minLoadSkewTokens: 256,
  minLoadSkewRatio: 1.5,
  cooldownMs: 10_000,
  targetReserveShare: 0.125,
  leaseMs: 30_000,
  leaseRouteBonusTokens: 0,
  offloadIntoColderCache: false,
  foregroundReuseDiscount: 0.5,
  foregroundMaxReuse: 4,
  prefillMsPerToken: 0.02,
  fallbackFixedMs: 0,
  fallbackBytesPerMs: 3.7e8,
  deviceLocalFixedMs: 0.75,
  deviceLocalBytesPerMs: 1.5e9,
  hostFixedMs: 1,
  hostBytesPerMs: 2e5,
  interferenceFactor: 1,
  ewmaAlpha: 0.2,
});

/** The names of the constants. */
export const TRANSFER_TUNING_KEYS = Object.keys(DEFAULT_TRANSFER_TUNING) as readonly (keyof TransferTuning)[];

/** Constants that must be > 0. */
export const POSITIVE_TUNING = [
  "hotnessHalfLifeMs",
  "placementIntervalMs",
  "fallbackBytesPerMs",
  "deviceLocalBytesPerMs",
  "hostBytesPerMs",
  "prefillMsPerToken",
] as const;
/** Constants that count blocks or chains (integers >= 1). */
export const INTEGER_TUNING = [
  "minBatchBlocks",
  "foregroundMaxBlocks",
  "backgroundCopyMaxBlocks",
  "backgroundCopyBatchMaxBlocks",
  "maxTrackedChains",
  "foregroundMaxReuse",
] as const;

/**
 * Splits a flat record of transfer settings (a benchmark's `--transfer-options` JSON) into the
 * public options and the internal constants, by name.
 */
export function splitTransferSettings(
  settings: Record<string, unknown>,
): { options: Record<string, unknown>; tuning: Record<string, unknown> } {
  const options: Record<string, unknown> = {};
  const tuning: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(settings)) {
    ((TRANSFER_TUNING_KEYS as readonly string[]).includes(k) ? tuning : options)[k] = v;
  }
  return { options, tuning };
}

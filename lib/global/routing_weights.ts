/**
 * The weights and thresholds routing policies read (RoutingContext.config), apart from the choice
 * of policy (routing_config.ts), so the policies need not import the registry that lists them.
 * The token weights price a rank's queue for transfer placement (one unit is the work of prefilling
 * one prompt token); the lmpool policy prices routes in device milliseconds (`device`).
 * @module
 */

import type { DeviceCostModel } from "./device_cost.ts";

/** Weights of a rank's queue in token-equivalents, and the eviction weight of the lmpool policy. */
export interface CostModelConfig {
  /** Per token still to prefill in a rank's queue (waiting + routed-but-unreported). Default 1. */
  waitingTokenWeight: number;
  /**
   * Per context token of running sequences. Decode shares every step with a new prefill, and its
   * attention cost grows with context, but one decode step per sequence is far cheaper than
   * prefilling the context again. Default 0.05.
   */
  runningTokenWeight: number;
  /** Fixed cost per queued or running sequence (scheduling, sampling, one decode slot). Default 32. */
  perSequenceTokens: number;
  /** Per prompt token not cached on the rank (missing prefill). Default 1. */
  missingPrefillWeight: number;
  /** Per token of cached blocks the request would evict (they may have to be recomputed later). Default 0.5. */
  reclaimTokenWeight: number;
  /** Blocks reserved beyond the prompt's for the first decode tokens. Default 1. */
  decodeReserveBlocks: number;
  /**
   * What a decoding sequence's wait for a new prefill counts, against a first token's wait, in the
   * lmpool route cost (route_time.ts). The decoder loses one inter-token gap, the waiting request
   * its first token. Counted in full, a hot prefix's owner with a decode batch priced a hit there
   * above recomputing the whole prefix on an idle rank, and the recomputing requests made the
   * first-token tail; not counted, prefills piled into decode batches and output throughput fell.
   * Default 0.5.
   */
  decodeWaitWeight: number;
}

/** SGLang cache-aware router thresholds. */
export interface CacheAwareConfig {
  /** Imbalanced when max - min outstanding requests exceeds this. Default 64. */
  balanceAbsThreshold: number;
  /** ...and max > min x this. Default 1.5. */
  balanceRelThreshold: number;
  /** Route to the best match only when matched/prompt tokens exceed this. Default 0.3. */
  matchThreshold: number;
}

/** llm-d default scorer weights. */
export interface WeightedScorersConfig {
  /** Prefix-cache scorer (matched fraction of the prompt's blocks). Default 3. */
  prefix: number;
  /** Queue scorer (min-max normalised outstanding requests, fewer is better). Default 2. */
  queue: number;
  /** KV-cache utilization scorer (1 - used fraction). Default 2. */
  kvUtilization: number;
}

/** Session affinity. */
export interface SessionAffinityConfig {
  /** Remembered sessions at most (least recently used are forgotten). Default 100000. */
  maxSessions: number;
}

/** Every routing weight and threshold (RoutingConfig without the policy). */
export interface RoutingWeights {
  cost: CostModelConfig;
  /** Step-cost coefficients the lmpool policy prices routes with (device_cost.ts). */
  device: DeviceCostModel;
  cacheAware: CacheAwareConfig;
  weightedScorers: WeightedScorersConfig;
  sessionAffinity: SessionAffinityConfig;
  /** A route reservation no worker report released is dropped after this long. Default 60000 ms. */
  reservationTtlMs: number;
}

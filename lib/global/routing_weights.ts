/**
 * The weights and thresholds routing policies read (RoutingContext.config), apart from the choice
 * of policy (routing_config.ts), so the policies need not import the registry that lists them.
 * Costs are in token-equivalents: one unit is the work of prefilling one prompt token.
 * @module
 */

/** Weights of the lmpool cost model and its bounded spill. */
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
  /** Spill away from the prefix owner only when its queue work exceeds the target's by this many tokens. Default 8192. */
  spillLoadGapTokens: number;
  /** ...and by this factor. Default 2. */
  spillLoadRatio: number;
  /** ...and the extra prefill the spill causes (owner's cached tokens lost) is at most this. Default 4096. */
  spillMaxExtraPrefillTokens: number;
  /**
   * Shared-prefix spill: when live sequences on the owner share the request's prefix, the spill's
   * extra prefill is paid once and then serves the requests that follow (the target holds the
   * prefix from then on), so it is divided by 1 + those sharers, counting at most this many. The
   * owner is then bypassed when it carries spillLoadRatio x the target's queue work and the gap
   * exceeds that amortized prefill (no absolute gap needed). 0 disables. Default 8.
   */
  spillMaxSharers: number;
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
  cacheAware: CacheAwareConfig;
  weightedScorers: WeightedScorersConfig;
  sessionAffinity: SessionAffinityConfig;
  /** A route reservation no worker report released is dropped after this long. Default 60000 ms. */
  reservationTtlMs: number;
}

/**
 * Every routing weight and threshold, in one typed config with documented defaults. Costs are in
 * token-equivalents: one unit is the work of prefilling one prompt token.
 * @module
 */

/** The routing policies, by name. */
export const POLICY_NAMES = ["lmpool", "round-robin", "least-loaded", "prefix-only", "cache-aware", "weighted-scorers", "session-affinity"] as const;

/** A routing policy name. */
export type PolicyName = (typeof POLICY_NAMES)[number];

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

/** The whole routing configuration. */
export interface RoutingConfig {
  /** Default "lmpool". */
  policy: PolicyName;
  cost: CostModelConfig;
  cacheAware: CacheAwareConfig;
  weightedScorers: WeightedScorersConfig;
  sessionAffinity: SessionAffinityConfig;
  /** A route reservation no worker report released is dropped after this long. Default 60000 ms. */
  reservationTtlMs: number;
}

/** Defaults of every routing setting. */
export const DEFAULT_ROUTING_CONFIG: Readonly<RoutingConfig> = Object.freeze({
  policy: "lmpool",
  cost: Object.freeze({
    waitingTokenWeight: 1,
    runningTokenWeight: 0.05,
    perSequenceTokens: 32,
    missingPrefillWeight: 1,
    reclaimTokenWeight: 0.5,
    decodeReserveBlocks: 1,
    spillLoadGapTokens: 8192,
    spillLoadRatio: 2,
    spillMaxExtraPrefillTokens: 4096,
    spillMaxSharers: 8,
  }),
  cacheAware: Object.freeze({ balanceAbsThreshold: 64, balanceRelThreshold: 1.5, matchThreshold: 0.3 }),
  weightedScorers: Object.freeze({ prefix: 3, queue: 2, kvUtilization: 2 }),
  sessionAffinity: Object.freeze({ maxSessions: 100_000 }),
  reservationTtlMs: 60_000,
}) as RoutingConfig;

/** A partial config, section by section. */
export type RoutingConfigInput = Partial<Omit<RoutingConfig, "cost" | "cacheAware" | "weightedScorers" | "sessionAffinity">> & {
  cost?: Partial<CostModelConfig>;
  cacheAware?: Partial<CacheAwareConfig>;
  weightedScorers?: Partial<WeightedScorersConfig>;
  sessionAffinity?: Partial<SessionAffinityConfig>;
};

/** Fills defaults and validates; throws RangeError naming the bad field and value. */
export function resolveRoutingConfig(input: RoutingConfigInput = {}): RoutingConfig {
  const c: RoutingConfig = {
    policy: input.policy ?? DEFAULT_ROUTING_CONFIG.policy,
    cost: { ...DEFAULT_ROUTING_CONFIG.cost, ...input.cost },
    cacheAware: { ...DEFAULT_ROUTING_CONFIG.cacheAware, ...input.cacheAware },
    weightedScorers: { ...DEFAULT_ROUTING_CONFIG.weightedScorers, ...input.weightedScorers },
    sessionAffinity: { ...DEFAULT_ROUTING_CONFIG.sessionAffinity, ...input.sessionAffinity },
    reservationTtlMs: input.reservationTtlMs ?? DEFAULT_ROUTING_CONFIG.reservationTtlMs,
  };
  if (!(POLICY_NAMES as readonly string[]).includes(c.policy)) {
    throw new RangeError(`unknown routing policy ${JSON.stringify(c.policy)}; valid: ${POLICY_NAMES.join(", ")}`);
  }
  const nonNeg = (section: string, rec: object) => {
    for (const [k, v] of Object.entries(rec)) {
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw new RangeError(`routing ${section}.${k} must be a finite number >= 0, got ${String(v)}`);
    }
  };
  nonNeg("cost", c.cost);
  nonNeg("cacheAware", c.cacheAware);
  nonNeg("weightedScorers", c.weightedScorers);
  nonNeg("sessionAffinity", c.sessionAffinity);
  if (c.cost.spillLoadRatio < 1) throw new RangeError(`routing cost.spillLoadRatio must be >= 1, got ${c.cost.spillLoadRatio}`);
  if (!Number.isInteger(c.cost.decodeReserveBlocks)) throw new RangeError(`routing cost.decodeReserveBlocks must be an integer, got ${c.cost.decodeReserveBlocks}`);
  if (c.cacheAware.matchThreshold > 1) throw new RangeError(`routing cacheAware.matchThreshold must be in [0, 1], got ${c.cacheAware.matchThreshold}`);
  if (!Number.isInteger(c.sessionAffinity.maxSessions) || c.sessionAffinity.maxSessions < 1) {
    throw new RangeError(`routing sessionAffinity.maxSessions must be an integer >= 1, got ${c.sessionAffinity.maxSessions}`);
  }
  if (!(c.reservationTtlMs > 0)) throw new RangeError(`routing reservationTtlMs must be > 0, got ${c.reservationTtlMs}`);
  return c;
}

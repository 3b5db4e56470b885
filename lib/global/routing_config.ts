/**
 * Every routing weight and threshold, in one typed config with documented defaults: the queue
 * weights in token-equivalents (one unit is the work of prefilling one prompt token) and the device
 * step costs the lmpool policy prices routes with, in milliseconds. Unknown keys are refused.
 * @module
 */

import { DEFAULT_DEVICE_COST, type DeviceCostModel } from "./device_cost.ts";
import { POLICY_NAMES, type PolicyName } from "./policies/policy_registry.ts";
import type {
  CacheAwareConfig,
  CostModelConfig,
  RoutingWeights,
  SessionAffinityConfig,
  WeightedScorersConfig,
} from "./routing_weights.ts";

export { POLICY_NAMES };
export type {
  CacheAwareConfig,
  CostModelConfig,
  PolicyName,
  RoutingWeights,
  SessionAffinityConfig,
  WeightedScorersConfig,
};

/** The whole routing configuration: the policy (one of the registry's, policies/policy_registry.ts) and the weights. */
export interface RoutingConfig extends RoutingWeights {
  /** Default "lmpool". */
  policy: PolicyName;
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
    decodeWaitWeight: 0.5,
  }),
  device: DEFAULT_DEVICE_COST,
  cacheAware: Object.freeze({ balanceAbsThreshold: 64, balanceRelThreshold: 1.5, matchThreshold: 0.3 }),
  weightedScorers: Object.freeze({ prefix: 3, queue: 2, kvUtilization: 2 }),
  sessionAffinity: Object.freeze({ maxSessions: 100_000 }),
  reservationTtlMs: 60_000,
}) as RoutingConfig;

/** A partial config, section by section. */
export type RoutingConfigInput =
  & Partial<Omit<RoutingConfig, "cost" | "device" | "cacheAware" | "weightedScorers" | "sessionAffinity">>
  & {
    cost?: Partial<CostModelConfig>;
    device?: Partial<DeviceCostModel>;
    cacheAware?: Partial<CacheAwareConfig>;
    weightedScorers?: Partial<WeightedScorersConfig>;
    sessionAffinity?: Partial<SessionAffinityConfig>;
  };

/** Fills defaults and validates; throws RangeError naming the bad field and value. */
export function resolveRoutingConfig(input: RoutingConfigInput = {}): RoutingConfig {
  const c: RoutingConfig = {
    policy: input.policy ?? DEFAULT_ROUTING_CONFIG.policy,
    cost: { ...DEFAULT_ROUTING_CONFIG.cost, ...input.cost },
    device: { ...DEFAULT_ROUTING_CONFIG.device, ...input.device },
    cacheAware: { ...DEFAULT_ROUTING_CONFIG.cacheAware, ...input.cacheAware },
    weightedScorers: { ...DEFAULT_ROUTING_CONFIG.weightedScorers, ...input.weightedScorers },
    sessionAffinity: { ...DEFAULT_ROUTING_CONFIG.sessionAffinity, ...input.sessionAffinity },
    reservationTtlMs: input.reservationTtlMs ?? DEFAULT_ROUTING_CONFIG.reservationTtlMs,
  };
  if (!(POLICY_NAMES as readonly string[]).includes(c.policy)) {
    throw new RangeError(`unknown routing policy ${JSON.stringify(c.policy)}; valid: ${POLICY_NAMES.join(", ")}`);
  }
  for (const section of ["cost", "device", "cacheAware", "weightedScorers", "sessionAffinity"] as const) {
    const known = Object.keys(DEFAULT_ROUTING_CONFIG[section]);
    for (const k of Object.keys(input[section] ?? {})) {
      if (!known.includes(k)) {
        throw new RangeError(`unknown routing setting ${section}.${k}; valid: ${known.join(", ")}`);
      }
    }
  }
  const nonNeg = (section: string, rec: object) => {
    for (const [k, v] of Object.entries(rec)) {
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
        throw new RangeError(`routing ${section}.${k} must be a finite number >= 0, got ${String(v)}`);
      }
    }
  };
  nonNeg("cost", c.cost);
  nonNeg("device", c.device);
  nonNeg("cacheAware", c.cacheAware);
  nonNeg("weightedScorers", c.weightedScorers);
  nonNeg("sessionAffinity", c.sessionAffinity);
  if (!Number.isInteger(c.cost.decodeReserveBlocks)) {
    throw new RangeError(`routing cost.decodeReserveBlocks must be an integer, got ${c.cost.decodeReserveBlocks}`);
  }
  if (c.cacheAware.matchThreshold > 1) {
    throw new RangeError(`routing cacheAware.matchThreshold must be in [0, 1], got ${c.cacheAware.matchThreshold}`);
  }
  if (!Number.isInteger(c.sessionAffinity.maxSessions) || c.sessionAffinity.maxSessions < 1) {
    throw new RangeError(
      `routing sessionAffinity.maxSessions must be an integer >= 1, got ${c.sessionAffinity.maxSessions}`,
    );
  }
  if (!(c.reservationTtlMs > 0)) {
    throw new RangeError(`routing reservationTtlMs must be > 0, got ${c.reservationTtlMs}`);
  }
  return c;
}

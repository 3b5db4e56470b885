/**
 * Policies by name: `createPolicy("cache-aware", config)`. The table below is the one list of
 * routing policies; POLICY_NAMES and PolicyName derive from it.
 * @module
 */
import { CacheAwarePolicy } from "./cache_aware.ts";
import { LeastLoadedPolicy } from "./least_loaded.ts";
import { LmpoolPolicy } from "./lmpool.ts";
import { PrefixOnlyPolicy } from "./prefix_only.ts";
import { RoundRobinPolicy } from "./round_robin.ts";
import type { RoutingPolicy } from "./routing_policy.ts";
import { SessionAffinityPolicy } from "./session_affinity.ts";
import { WeightedScorersPolicy } from "./weighted_scorers.ts";

/** What a policy's constructor may read from the routing config. */
interface PolicySettings {
  readonly sessionAffinity: { readonly maxSessions: number };
}

/** Each policy's factory, by name, in the order POLICY_NAMES lists them. */
const POLICIES = {
  lmpool: () => new LmpoolPolicy(),
  "round-robin": () => new RoundRobinPolicy(),
  "least-loaded": () => new LeastLoadedPolicy(),
  "prefix-only": () => new PrefixOnlyPolicy(),
  "cache-aware": () => new CacheAwarePolicy(),
  "weighted-scorers": () => new WeightedScorersPolicy(),
  "session-affinity": (c: PolicySettings) => new SessionAffinityPolicy(c.sessionAffinity.maxSessions),
} as const satisfies Record<string, (c: PolicySettings) => RoutingPolicy>;

/** A routing policy name. */
export type PolicyName = keyof typeof POLICIES;

/** The routing policies, by name. */
export const POLICY_NAMES = Object.freeze(Object.keys(POLICIES)) as readonly PolicyName[];

/** A new policy instance; an unknown name is a RangeError listing the valid ones. */
export function createPolicy(name: string, config: PolicySettings): RoutingPolicy {
  if (!Object.hasOwn(POLICIES, name)) {
    throw new RangeError(`unknown routing policy ${JSON.stringify(name)}; valid: ${POLICY_NAMES.join(", ")}`);
  }
  return POLICIES[name as PolicyName](config);
}

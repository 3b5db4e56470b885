/**
 * Policies by name: `createPolicy("cache-aware", config)`.
 * @module
 */
import { POLICY_NAMES, type PolicyName, type RoutingConfig } from "../routing_config.ts";
import { CacheAwarePolicy } from "./cache_aware.ts";
import { LeastLoadedPolicy } from "./least_loaded.ts";
import { LmpoolPolicy } from "./lmpool.ts";
import { PrefixOnlyPolicy } from "./prefix_only.ts";
import { RoundRobinPolicy } from "./round_robin.ts";
import type { RoutingPolicy } from "./routing_policy.ts";
import { SessionAffinityPolicy } from "./session_affinity.ts";
import { WeightedScorersPolicy } from "./weighted_scorers.ts";

/** A new policy instance; an unknown name is a RangeError listing the valid ones. */
export function createPolicy(name: string, config: Pick<RoutingConfig, "sessionAffinity">): RoutingPolicy {
  switch (name as PolicyName) {
    case "lmpool":
      return new LmpoolPolicy();
    case "round-robin":
      return new RoundRobinPolicy();
    case "least-loaded":
      return new LeastLoadedPolicy();
    case "prefix-only":
      return new PrefixOnlyPolicy();
    case "cache-aware":
      return new CacheAwarePolicy();
    case "weighted-scorers":
      return new WeightedScorersPolicy();
    case "session-affinity":
      return new SessionAffinityPolicy(config.sessionAffinity.maxSessions);
  }
  throw new RangeError(`unknown routing policy ${JSON.stringify(name)}; valid: ${POLICY_NAMES.join(", ")}`);
}

/**
 * Prefix-only: the longest cached prefix wins, load only breaks ties.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { best, byKeys, type RoutingPolicy } from "./routing_policy.ts";

/** Picks the longest contiguous prefix match (ties: fewer outstanding requests, then lower rank). */
export class PrefixOnlyPolicy implements RoutingPolicy {
  readonly name = "prefix-only" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const rank = best(ctx.healthyRanks(), byKeys((r) => -ctx.matchedBlocks(r), (r) => ctx.outstandingRequests(r)));
    return { rank, reason: ctx.matchedBlocks(rank) > 0 ? "prefix-hit" : "prefix-miss" };
  }
}

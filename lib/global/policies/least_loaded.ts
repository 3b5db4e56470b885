/**
 * Least-loaded: fewest outstanding requests, ignoring cache.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { best, byKeys, type RoutingPolicy } from "./routing_policy.ts";
import { projectRouteCost } from "../route_cost.ts";

/** Picks the rank with the fewest running + waiting + pending requests (ties: less queued work). */
export class LeastLoadedPolicy implements RoutingPolicy {
  readonly name = "least-loaded" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const rank = best(ctx.healthyRanks(), byKeys((r) => ctx.outstandingRequests(r), (r) => projectRouteCost(ctx, r).queueWork));
    return { rank, reason: "least-loaded" };
  }
}

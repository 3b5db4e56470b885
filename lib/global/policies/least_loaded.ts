/**
 * Least-loaded: fewest outstanding requests, ignoring cache.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { best, byKeys, type RoutingPolicy } from "./routing_policy.ts";
import { projectRouteCost } from "../route_cost.ts";

/**
 * Picks the rank with the fewest running + waiting + pending requests (ties: less queued work,
 * then the next rank after the last one chosen). Rotating the last tie-break matters at light
 * load, where every rank is often idle: breaking it by rank index would send each such request to
 * rank 0, herding work and cached prefixes onto one rank while the others wait.
 */
export class LeastLoadedPolicy implements RoutingPolicy {
  readonly name = "least-loaded" as const;
  #next = 0;

  choose(ctx: RoutingContext): RouteChoice {
    const ranks = ctx.healthyRanks();
    const span = Math.max(...ranks) + 1;
    const turn = (r: number) => (r - this.#next + span) % span;
    const rank = best(
      ranks,
      byKeys((r) => ctx.outstandingRequests(r), (r) => projectRouteCost(ctx, r).queueWork, turn),
    );
    this.#next = rank + 1;
    return { rank, reason: "least-loaded" };
  }
}

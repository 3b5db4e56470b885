/**
 * Round-robin over healthy ranks: the plain data-parallel baseline.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import type { RoutingPolicy } from "./routing_policy.ts";

/** Cycles through healthy ranks in order, ignoring cache and load. */
export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = "round-robin" as const;
  #next = 0;

  choose(ctx: RoutingContext): RouteChoice {
    const ranks = ctx.healthyRanks();
    // Next healthy rank at or after the cursor, so a dead rank's turn passes to its successor.
    const r = ranks.find((x) => x >= this.#next) ?? ranks[0]!;
    this.#next = r + 1;
    return { rank: r, reason: "round-robin" };
  }
}

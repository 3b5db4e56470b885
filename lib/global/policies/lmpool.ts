/**
 * The lmpool policy: among the ingress rank and its NVLink partners, the capacity-feasible rank of
 * least projected cost (queue work + missing prefill + reclaim pressure) wins, unless that rank is
 * the prefix owner and it is overloaded relative to another candidate, in which case a bounded
 * spill goes to the cheapest such candidate.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { projectRouteCost, type RouteCost } from "../route_cost.ts";
import type { RoutingPolicy } from "./routing_policy.ts";

/** The cost-model policy (the default). */
export class LmpoolPolicy implements RoutingPolicy {
  readonly name = "lmpool" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const costs = ctx.topologyCandidates().map((r) => projectRouteCost(ctx, r));
    const feasible = costs.filter((c) => c.feasible);
    if (feasible.length === 0) {
      // Nobody has room now: queue where the shortage is smallest (it will wait for blocks there).
      const fits = costs.filter((c) => !c.neverFits);
      const pool = fits.length > 0 ? fits : costs;
      const pick = pool.reduce((a, b) => (b.headroom > a.headroom || (b.headroom === a.headroom && lessCost(ctx, b, a)) ? b : a));
      return { rank: pick.rank, reason: "infeasible" };
    }
    let chosen = feasible[0]!;
    for (const c of feasible) if (lessCost(ctx, c, chosen)) chosen = c;
    const spill = boundedSpill(ctx, chosen, feasible);
    if (spill) return { rank: spill.rank, reason: "spill" };
    return { rank: chosen.rank, reason: ctx.match(chosen.rank).blocks > 0 ? "prefix-hit" : "least-cost" };
  }
}

/** a sorts before b: lower total, then higher topology affinity to the ingress, then lower rank. */
function lessCost(ctx: RoutingContext, a: RouteCost, b: RouteCost): boolean {
  if (a.total !== b.total) return a.total < b.total;
  const ingress = ctx.query.ingressRank;
  if (ingress !== undefined && ctx.topology) {
    const d = ctx.topology.affinity(ingress, a.rank) - ctx.topology.affinity(ingress, b.rank);
    if (d !== 0) return d > 0;
  }
  return a.rank < b.rank;
}

/**
 * When `chosen` holds the longest prefix and its queue work exceeds another feasible candidate's
 * by more than spillLoadGapTokens and spillLoadRatio x, and moving there recomputes at most
 * spillMaxExtraPrefillTokens more prompt tokens, returns the cheapest such candidate.
 */
function boundedSpill(ctx: RoutingContext, chosen: RouteCost, feasible: readonly RouteCost[]): RouteCost | undefined {
  const w = ctx.config.cost;
  const ownerBlocks = ctx.match(chosen.rank).blocks;
  if (ownerBlocks === 0) return undefined;
  for (const c of feasible) if (ctx.match(c.rank).blocks > ownerBlocks) return undefined; // not the owner
  let out: RouteCost | undefined;
  for (const c of feasible) {
    if (c.rank === chosen.rank) continue;
    const overloaded = chosen.queueWork - c.queueWork > w.spillLoadGapTokens && chosen.queueWork > w.spillLoadRatio * c.queueWork;
    const extraPrefill = ctx.cachedTokens(chosen.rank) - ctx.cachedTokens(c.rank);
    if (overloaded && extraPrefill <= w.spillMaxExtraPrefillTokens && (!out || lessCost(ctx, c, out))) out = c;
  }
  return out;
}

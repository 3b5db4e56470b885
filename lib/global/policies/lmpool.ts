/**
 * The lmpool policy: among the ingress rank and its NVLink partners, the capacity-feasible rank of
 * least projected cost (queue work + missing prefill + reclaim pressure) wins, unless that rank is
 * the prefix owner and it is overloaded relative to another candidate, in which case a bounded
 * spill goes to the cheapest such candidate (a hot prefix shared by live requests spills sooner:
 * its one extra prefill serves the requests that follow).
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
      const pick = pool.reduce((
        a,
        b,
      ) => (b.headroom > a.headroom || (b.headroom === a.headroom && lessCost(ctx, b, a)) ? b : a));
      return { rank: pick.rank, reason: "infeasible" };
    }
    let chosen = feasible[0]!;
    for (const c of feasible) if (lessCost(ctx, c, chosen)) chosen = c;
    const spill = boundedSpill(ctx, chosen, feasible);
    if (spill) return { rank: spill.rank, reason: "spill" };
    return { rank: chosen.rank, reason: ctx.matchedBlocks(chosen.rank) > 0 ? "prefix-hit" : "least-cost" };
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
 * When `chosen` holds the longest prefix, another feasible candidate carries a spillLoadRatio-th of
 * its queue work or less, and moving there recomputes at most spillMaxExtraPrefillTokens more
 * prompt tokens, returns the cheapest such candidate, if either
 * - the queue gap exceeds spillLoadGapTokens, or
 * - live sequences on the owner share the prefix and the gap exceeds the extra prefill divided by
 *   1 + sharers (at most spillMaxSharers): the target pays the prefill once and then holds the
 *   prefix for the requests that follow. Without this a hot prefix whose prefill outweighs the
 *   owner's whole queue never leaves its owner, however skewed the load (a 9k-token prefix vs. a
 *   queue of 16 short decodes), while a second copy pays for itself after a few requests.
 */
function boundedSpill(ctx: RoutingContext, chosen: RouteCost, feasible: readonly RouteCost[]): RouteCost | undefined {
  const w = ctx.config.cost;
  const ownerBlocks = ctx.matchedBlocks(chosen.rank);
  if (ownerBlocks === 0) return undefined;
  for (const c of feasible) if (ctx.matchedBlocks(c.rank) > ownerBlocks) return undefined; // not the owner
  const sharers = Math.min(ctx.liveSharers(chosen.rank), w.spillMaxSharers);
  let out: RouteCost | undefined;
  for (const c of feasible) {
    if (c.rank === chosen.rank || chosen.queueWork <= w.spillLoadRatio * c.queueWork) continue;
    const gap = chosen.queueWork - c.queueWork;
    const extraPrefill = ctx.cachedTokens(chosen.rank) - ctx.cachedTokens(c.rank);
    const amortized = (w.missingPrefillWeight * extraPrefill) / (1 + sharers);
    const overloaded = gap > w.spillLoadGapTokens || (sharers > 0 && gap > amortized);
    const bounded = extraPrefill / (1 + sharers) <= w.spillMaxExtraPrefillTokens;
    if (overloaded && bounded && (!out || lessCost(ctx, c, out))) out = c;
  }
  return out;
}

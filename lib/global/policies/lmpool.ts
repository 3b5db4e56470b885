/**
 * The lmpool policy: among the ingress rank and its direct partners (every healthy rank without an
 * ingress), the capacity-feasible rank of least latency cost wins (route_time.ts: the device's
 * queued prefill, this request's own prefill times the requests on the device that wait for it,
 * and the prefill of what its blocks would evict). Ties (ranks of
 * one GPU cost the same but for their prefixes) go to the rank with fewer requests, then more room,
 * then the lower rank. When no rank has room now,
 * the request queues where the shortage is smallest.
 * @module
 */
import type { RouteChoice, RoutingContext } from "../routing_context.ts";
import { projectRouteCost, type RouteCost } from "../route_cost.ts";
import { projectRouteTime, type RouteTime } from "../route_time.ts";
import type { RoutingPolicy } from "./routing_policy.ts";

/** The cost-model policy (the default). */
export class LmpoolPolicy implements RoutingPolicy {
  readonly name = "lmpool" as const;

  choose(ctx: RoutingContext): RouteChoice {
    const costs = ctx.topologyCandidates().map((r) => projectRouteCost(ctx, r));
    const feasible = costs.filter((c) => c.feasible);
    if (feasible.length === 0) {
      const fits = costs.filter((c) => !c.neverFits);
      const pool = fits.length > 0 ? fits : costs;
      const pick = pool.reduce((a, b) => (b.headroom > a.headroom ? b : a));
      return { rank: pick.rank, reason: "infeasible" };
    }
    let best: { cost: RouteCost; time: RouteTime } | undefined;
    for (const cost of feasible) {
      const time = projectRouteTime(ctx, cost.rank, cost, ctx.speeds);
      if (!best || better(ctx, { cost, time }, best)) best = { cost, time };
    }
    const rank = best!.cost.rank;
    return { rank, reason: ctx.matchedBlocks(rank) > 0 ? "prefix-hit" : "least-cost" };
  }
}

/** Relative difference under which two costs tie (the model is not that exact). */
const TIE = 1e-6;

/** a is the better choice: lower cost, then fewer requests, then more headroom, then ingress affinity, then lower rank. */
function better(
  ctx: RoutingContext,
  a: { cost: RouteCost; time: RouteTime },
  b: { cost: RouteCost; time: RouteTime },
): boolean {
  const ta = a.time.totalMs, tb = b.time.totalMs;
  if (Math.abs(ta - tb) > TIE * Math.max(ta, tb)) return ta < tb;
  // Equal cost happens between ranks of one GPU: spread requests over them, then blocks.
  const oa = ctx.outstandingRequests(a.cost.rank), ob = ctx.outstandingRequests(b.cost.rank);
  if (oa !== ob) return oa < ob;
  if (a.cost.headroom !== b.cost.headroom) return a.cost.headroom > b.cost.headroom;
  const ingress = ctx.query.ingressRank;
  if (ingress !== undefined && ctx.topology) {
    const d = ctx.topology.affinity(ingress, a.cost.rank) - ctx.topology.affinity(ingress, b.cost.rank);
    if (d !== 0) return d > 0;
  }
  return a.cost.rank < b.cost.rank;
}
